//! The ner extension's own tests: its service through the public API and a kernel, and its
//! precision and recall on labelled sentences.

mod labelled;
mod service;
