//! Everything an extension author needs, in one import: `use mnemo_kernel::prelude::*;`.
//!
//! The roles and their request types, events, typed tools, config checking, the context every
//! role receives, and the error types. Host-side items (the running kernel, its builder, the
//! model clients, the router) are in [`crate::host`] and are not part of it.

pub use async_trait::async_trait;
pub use schemars::JsonSchema;

pub use crate::{
    BoxError, ConfigError, ContextProvider, ContextRequest, Event, EventHandler, EventPayload,
    Extension, ExtensionFactory, ExtensionSection, JobReport, JobSpec, KernelContext, Limits,
    Registrar, SchedulerProvider, Tool, ToolError, ToolProvider, ToolScope, ToolSet, ToolSpec,
    TypedEvent, ValidateConfig,
};
