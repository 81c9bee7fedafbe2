//! The workspace's integration tests, linked as one binary (linking each file alone cost a link
//! per file on a 2-core machine). Each module is one area's tests; `common` is what they share.
//! The extensions', the kernel's and the replay harness's own tests are here too, a folder each
//! (`embedding/`, `markdown_memory/`, `ner/`, `kernel/`, `replay/`), so that no crate links a test
//! binary of its own. Run one area with `cargo test --test it <module>::`, e.g.
//! `cargo test --test it http_api::` or `cargo test --test it markdown_memory::`.

mod common;

mod bench_small;
mod cli_admin;
mod cli_hygiene;
mod cli_import;
mod cli_memory;
mod concurrency;
mod config_errors;
mod crash_ingest;
mod degradation;
mod embedding;
mod erasure;
mod eval_screening;
mod eval_small;
mod export_import;
mod extensions;
mod hostile_input;
mod http_access;
mod http_api;
mod http_as_of;
mod http_inspection;
mod http_isolation;
mod http_mcp;
mod http_people;
mod http_provider;
mod http_python_client;
mod http_quarantine;
mod http_sampling;
mod http_schemathesis;
mod import_with_model;
mod inspector_browser;
mod isolation;
mod jobs_retry;
mod kernel;
mod lineage;
mod llama_like_server;
mod markdown_memory;
mod mcp_stdio;
mod memory_hostile_search;
#[cfg(feature = "postgres")]
mod migrate_store;
mod multi_process;
mod ner;
mod openai_http;
mod openai_stream;
#[cfg(feature = "postgres")]
mod postgres_instances;
mod postgres_script;
mod reindex;
mod replay;
mod replay_cli;
mod scenarios;
mod shutdown;
mod telemetry;
mod tidy;
