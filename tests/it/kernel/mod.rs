//! The kernel's own integration tests.

mod llm_json_properties;
