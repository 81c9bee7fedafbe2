//! Phase 6 of `mnemo bench-http`: does one user's import hold back another user's new turn?
//! One client imports `turns` turns of one user in batches of 100; once a fifth of them are
//! acknowledged, another user says one thing, and the phase times how long after its
//! acknowledgement that turn has a vector (a vector-only search of its own words finds it).

use std::time::{Duration, Instant};

use mnemo_memory::{MemoryService, SearchMode, SearchRequest};
use serde_json::json;

/// Events in each request of the import.
const BATCH: usize = 100;
/// How long the phase waits for the turn's vector.
const PATIENCE: Duration = Duration::from_secs(120);

/// Who imports and who speaks, and where.
pub(super) struct FairQueue<'a> {
    pub(super) service: &'a MemoryService,
    pub(super) url: &'a str,
    pub(super) importer_key: &'a str,
    pub(super) speaker: &'a str,
    pub(super) speaker_key: &'a str,
    pub(super) run_id: u128,
    pub(super) turns: usize,
}

impl FairQueue<'_> {
    /// Runs the phase; reports the texts waiting for a vector when the turn was acknowledged
    /// and the seconds until it had one (`null` if not within [`PATIENCE`]).
    pub(super) async fn run(
        &self,
        random: &mut crate::bench::Random,
    ) -> anyhow::Result<serde_json::Value> {
        let client = reqwest::Client::new();
        let endpoint = format!("{}/v1/events", self.url);
        let batches: Vec<serde_json::Value> = (0..self.turns.div_ceil(BATCH))
            .map(|batch| {
                let events: Vec<serde_json::Value> = (0..BATCH.min(self.turns - batch * BATCH))
                    .map(|index| {
                        json!({"id": format!("fair-import-{:x}-{batch}-{index}", self.run_id),
                               "type": "user_message", "at": "2027-01-03T00:00:00Z",
                               "session_id": format!("fair-import-{:x}", self.run_id),
                               "text": random.turn()})
                    })
                    .collect();
                json!({ "events": events })
            })
            .collect();
        let importing = {
            let client = client.clone();
            let endpoint = endpoint.clone();
            let key = self.importer_key.to_owned();
            let (posted, mut fifth) = tokio::sync::watch::channel(0usize);
            let task = tokio::spawn(async move {
                for (index, batch) in batches.into_iter().enumerate() {
                    let response = client
                        .post(&endpoint)
                        .bearer_auth(&key)
                        .json(&batch)
                        .send()
                        .await?;
                    anyhow::ensure!(
                        response.status().is_success(),
                        "import batch: {}",
                        response.status()
                    );
                    let _ = posted.send((index + 1) * BATCH);
                }
                Ok(())
            });
            let threshold = self.turns / 5;
            fifth.wait_for(|posted| *posted >= threshold).await.ok();
            task
        };
        let words = format!(
            "fairness probe {:x}: my bike lock code is 7781 and it hangs by the back door",
            self.run_id
        );
        let probe = json!({"id": format!("fair-probe-{:x}", self.run_id), "type": "user_message",
                           "at": "2027-01-03T00:00:01Z", "session_id": format!("fair-probe-{:x}", self.run_id),
                           "text": words});
        let reply: serde_json::Value = client
            .post(&endpoint)
            .bearer_auth(self.speaker_key)
            .json(&probe)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let acknowledged = Instant::now();
        let queued = self.service.pending_index().await?;
        let memory_id = reply["results"][0]["memory_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        anyhow::ensure!(!memory_id.is_empty(), "the probe was not stored: {reply}");
        let request = SearchRequest {
            query: words.clone(),
            user_id: Some(self.speaker.to_owned()),
            limit: 5,
            mode: SearchMode::Vector,
            ..SearchRequest::default()
        };
        let mut seconds = None;
        while acknowledged.elapsed() < PATIENCE {
            let hits = self.service.search(&request).await?;
            if hits.iter().any(|hit| hit.memory.id == memory_id) {
                seconds = Some(acknowledged.elapsed().as_secs_f64());
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        importing.await??;
        Ok(json!({
            "import_turns": self.turns,
            "queued_when_acknowledged": queued,
            "seconds_to_vector": seconds.map(|seconds| (seconds * 1000.0).round() / 1000.0),
        }))
    }
}
