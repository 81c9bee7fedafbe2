//! The memory service as the published [`MemoryHost`]: each call delegates to the service, and
//! the crate's own errors become the API's opaque [`mnemo_memory_api::MemoryApiError`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemo_kernel::{Event, ToolScope};
use mnemo_memory_api::{
    EntitySummary, ExternalId, ForgetReceipt, HostLimits, IngestedEvent, KeyRecord,
    McpSessionRecord, Memory, MemoryHost, MemoryStats, MemoryType, OwnerSummary, Person, Result,
    SessionKey, Subject,
};
use serde_json::{Map, Value};

use crate::service::MemoryService;

#[async_trait]
impl MemoryHost for MemoryService {
    fn limits(&self) -> HostLimits {
        let config = self.config();
        HostLimits {
            max_content_chars: config.max_content_chars,
            search_limit: config.search_limit,
            max_search_limit: config.max_search_limit,
        }
    }

    fn store_unreachable(&self) -> Option<String> {
        MemoryService::store_unreachable(self)
    }

    async fn ingest_batch(
        &self,
        events: &[Event],
        from_user_key: bool,
    ) -> Result<Vec<IngestedEvent>> {
        Ok(MemoryService::ingest_batch(self, events, from_user_key).await?)
    }

    async fn import(&self, event: &Event) -> Result<Option<String>> {
        Ok(MemoryService::import(self, event).await?)
    }

    async fn import_from_user_key(&self, event: &Event) -> Result<Option<String>> {
        Ok(MemoryService::import_from_user_key(self, event).await?)
    }

    async fn import_row(&self, table: &str, row: &Value) -> Result<bool> {
        Ok(MemoryService::import_row(self, table, row).await?)
    }

    async fn export_rows(&self, user_id: Option<&str>) -> Result<Vec<Value>> {
        Ok(MemoryService::export_rows(self, user_id).await?)
    }

    async fn remember(
        &self,
        scope: &ToolScope,
        content: &str,
        subjects: &[Subject],
        expires_at: Option<DateTime<Utc>>,
        shared: bool,
    ) -> Result<(String, Vec<String>)> {
        Ok(MemoryService::remember(self, scope, content, subjects, expires_at, shared).await?)
    }

    async fn store_typed(
        &self,
        scope: &ToolScope,
        memory_type: MemoryType,
        content: &str,
        metadata: Map<String, Value>,
    ) -> Result<String> {
        Ok(MemoryService::store_typed(self, scope, memory_type, content, metadata).await?)
    }

    async fn correct_fact(
        &self,
        user_id: Option<&str>,
        old_id: &str,
        content: &str,
    ) -> Result<String> {
        Ok(MemoryService::correct_fact(self, user_id, old_id, content).await?)
    }

    async fn confirm(&self, owner: &str, id: &str) -> Result<Vec<String>> {
        Ok(MemoryService::confirm(self, owner, id).await?)
    }

    async fn release(&self, owner: &str, memory_id: &str) -> Result<Memory> {
        Ok(MemoryService::release(self, Some(owner), memory_id).await?)
    }

    async fn forget(&self, owner: &str, memory_id: &str) -> Result<ForgetReceipt> {
        Ok(MemoryService::forget(self, owner, memory_id).await?)
    }

    async fn erase_user(&self, user_id: &str) -> Result<ForgetReceipt> {
        Ok(MemoryService::erase_user(self, user_id).await?)
    }

    async fn receipts(&self, user_id: &str, limit: usize) -> Result<Vec<ForgetReceipt>> {
        Ok(MemoryService::receipts(self, Some(user_id), limit).await?)
    }

    async fn replaced_by(&self, id: &str) -> Result<Vec<Memory>> {
        Ok(MemoryService::replaced_by(self, id).await?)
    }

    async fn session_provider(&self, session: &SessionKey) -> Result<Option<String>> {
        Ok(MemoryService::session_provider(self, session).await?)
    }

    async fn find_person(&self, owner: &str, reference: &str) -> Result<Option<Person>> {
        Ok(MemoryService::find_person(self, owner, reference).await?)
    }

    async fn person_by_external_id(
        &self,
        owner: &str,
        external: &ExternalId,
    ) -> Result<Option<Person>> {
        Ok(MemoryService::person_by_external_id(self, owner, external).await?)
    }

    async fn get_known_people(&self, owner: &str) -> Result<Vec<Person>> {
        Ok(MemoryService::get_known_people(self, owner).await?)
    }

    async fn stats(&self, user_id: Option<&str>) -> Result<MemoryStats> {
        Ok(MemoryService::stats(self, user_id).await?)
    }

    async fn owners(&self, limit: usize) -> Result<Vec<OwnerSummary>> {
        Ok(MemoryService::owners(self, limit).await?)
    }

    async fn owner_entities(&self, owner: &str, limit: usize) -> Result<Vec<EntitySummary>> {
        Ok(MemoryService::owner_entities(self, owner, limit).await?)
    }

    async fn pending_index(&self) -> Result<i64> {
        Ok(MemoryService::pending_index(self).await?)
    }

    async fn keys(&self) -> Result<Vec<KeyRecord>> {
        Ok(MemoryService::keys(self).await?)
    }

    async fn key(&self, id: &str) -> Result<Option<KeyRecord>> {
        Ok(MemoryService::key(self, id).await?)
    }

    async fn insert_key(&self, key: &KeyRecord) -> Result<bool> {
        Ok(MemoryService::insert_key(self, key).await?)
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<Option<KeyRecord>> {
        Ok(MemoryService::revoke_key(self, id, at).await?)
    }

    async fn store_setting(&self, name: &str) -> Result<Option<String>> {
        Ok(MemoryService::store_setting(self, name).await?)
    }

    async fn set_store_setting(&self, name: &str, value: &str) -> Result<bool> {
        Ok(MemoryService::set_store_setting(self, name, value).await?)
    }

    async fn store_mcp_session(&self, id: &str, initialize: &str) -> Result<()> {
        Ok(MemoryService::store_mcp_session(self, id, initialize).await?)
    }

    async fn bind_mcp_session(&self, id: &str, key_id: &str) -> Result<()> {
        Ok(MemoryService::bind_mcp_session(self, id, key_id).await?)
    }

    async fn mcp_session(&self, id: &str) -> Result<Option<McpSessionRecord>> {
        Ok(MemoryService::mcp_session(self, id).await?)
    }

    async fn delete_mcp_session(&self, id: &str) -> Result<()> {
        Ok(MemoryService::delete_mcp_session(self, id).await?)
    }

    async fn add_chat_member(&self, chat: &str, user: &str) -> Result<bool> {
        Ok(MemoryService::add_chat_member(self, chat, user).await?)
    }

    async fn remove_chat_member(&self, chat: &str, user: &str) -> Result<bool> {
        Ok(MemoryService::remove_chat_member(self, chat, user).await?)
    }

    async fn is_chat_member(&self, chat: &str, user: &str) -> Result<bool> {
        Ok(MemoryService::is_chat_member(self, chat, user).await?)
    }
}
