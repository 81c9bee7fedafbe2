//! The service's search entry points: the service's [`Searcher`](crate::search::Searcher)
//! ranks, and the service counts what it returned as recalled (`recalls.rs`).

use super::MemoryService;
use crate::error::Result;
use crate::store::TextScope;
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

    /// Whether the scope `request` searches holds at most `count` memories (0: never), as the
    /// search's cached corpus statistics count them: a small store's context is filled with
    /// its best facts even when none is similar to the prompt.
    ///
    /// # Errors
    /// The store fails.
    pub async fn holds_at_most(&self, request: &SearchRequest, count: usize) -> Result<bool> {
        if count == 0 {
            return Ok(false);
        }
        let held = self
            .state()?
            .searcher
            .stats()
            .document_count(self.store()?.as_ref(), TextScope::of(request))
            .await?;
        Ok(usize::try_from(held).is_ok_and(|held| held <= count))
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
