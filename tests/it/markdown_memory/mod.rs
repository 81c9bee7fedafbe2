//! The markdown_memory extension's own tests: its workspace files, BM25, parsers, session
//! buffers, and the extension inside a real kernel.

mod bm25;
mod common;
mod crash;
mod extension;
mod files;
mod properties;
mod sessions;
mod sweep;
mod world;
