//! The service's search entry points: the service's [`Searcher`](crate::search::Searcher)
//! ranks, and the service counts what it returned as recalled (`recalls.rs`).

use super::MemoryService;
use crate::error::Result;
use crate::types::{CandidateList, SearchHit, SearchRequest};

impl MemoryService {
    /// Searches with the request's mode and filters (see `Searcher::search` in
    /// `search/ranking.rs`), and with `touch` counts the hits as recalled.
    ///
    /// # Errors
    /// The store fails. Query text never causes an error.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>> {
        crate::search::traced(request, async {
            let hits = self.state()?.searcher.search(request).await?;
            if request.touch && !hits.is_empty() {
                self.recalled(&hits).await?;
            }
            Ok(hits)
        })
        .await
    }

    /// The candidate lists [`Self::search`] fuses, each at most `depth` long, with each list's
    /// own scores (see `Searcher::gather` in `search/candidates.rs`): the evaluation reads them
    /// to study fusion.
    ///
    /// # Errors
    /// The store fails. Query text never causes an error.
    pub async fn candidate_lists(
        &self,
        request: &SearchRequest,
        depth: usize,
    ) -> Result<Vec<CandidateList>> {
        Ok(self.state()?.searcher.gather(request, depth).await?.lists)
    }

    /// Counts `hits` as recalled. A faded memory recalled is back in the context at once (one
    /// write, rarely); the other recalls are counted in the background (`recalls.rs`).
    async fn recalled(&self, hits: &[SearchHit]) -> Result<()> {
        let (faded, recalled): (Vec<&SearchHit>, Vec<&SearchHit>) =
            hits.iter().partition(|hit| hit.memory.faded_at.is_some());
        let ids = |hits: Vec<&SearchHit>| -> Vec<String> {
            hits.iter().map(|hit| hit.memory.id.clone()).collect()
        };
        let now = self.now()?;
        if !faded.is_empty() {
            self.store()?.touch(&ids(faded), 1, now).await?;
        }
        self.recalls.note(&ids(recalled), now);
        Ok(())
    }
}
