//! What the property tests share: a seeded random source, and every route by which a user can
//! get a memory back.

use mnemo_kernel::host::Kernel;
use mnemo_kernel::{ContextRequest, ToolScope};
use serde_json::json;

/// A xorshift source: the same seed gives the same lifecycle.
pub(crate) struct Random(pub(crate) u64);

impl Random {
    /// The next number.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Everything the user of `scope` can get back for `query`: each search mode, both recall
/// tools, the typed search, the context block, and the markdown tools.
pub(crate) async fn every_route(kernel: &Kernel, scope: &ToolScope, query: &str) -> String {
    let mut seen = String::new();
    let mut calls = vec![
        ("recall", json!({"query": query})),
        ("search_memories", json!({"query": query, "limit": 50})),
        ("md_recall", json!({"days": 60})),
        ("md_search_history", json!({"query": query, "limit": 50})),
    ];
    for mode in ["hybrid", "fts", "vector", "entity"] {
        calls.push((
            "search_memory",
            json!({"query": query, "mode": mode, "limit": 50}),
        ));
    }
    for (tool, arguments) in calls {
        let result = kernel.call_tool(scope, tool, arguments).await.unwrap();
        seen.push_str(&result.to_string());
    }
    let blocks = kernel
        .gather_context(&ContextRequest {
            prompt: query.to_owned(),
            user_id: scope.user_id.clone(),
            session_id: format!("{}-probe", scope.user_id),
            chat_id: None,
            at: scope.at,
            history_messages: 0,
            as_of: None,
        })
        .await;
    for (_, block) in blocks {
        seen.push_str(&block);
    }
    seen
}
