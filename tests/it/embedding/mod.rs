//! The embedding extension's own tests: the local model against reference vectors, and the
//! remote provider against a real local HTTP server.

mod fidelity;
mod remote;
