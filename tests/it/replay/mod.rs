//! The replay harness's own tests.

mod parse_properties;
