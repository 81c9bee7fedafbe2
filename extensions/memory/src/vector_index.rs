//! The quantised vector stage: an in-memory mirror of `vec_memories` that answers KNN queries
//! in two steps, a Hamming scan over one sign bit per dimension to pick candidates, then a
//! re-scoring of those candidates against 8-bit codes of the full vectors.
//!
//! `vec_memories` (sqlite-vec, float32) stays the durable copy and the source of every load: the
//! mirror holds nothing that the table does not, so a crash loses nothing and a restart rebuilds
//! it. Each change to the table bumps `vector_generation` in `memory_metadata` in the same
//! transaction; the process that made it applies it here after the commit, and a search that
//! finds the stored generation ahead of the mirror's (another process wrote) reloads first.
//!
//! The rows are kept in one partition per owner, in the order they were stored: a search for one
//! owner scans that owner's rows only, so in a store shared by many users its cost follows the
//! owner's data, and its answer is the same whatever the other partitions hold.
//!
//! Cost per stored 384-d vector: 48 bytes of sign bits, 384 bytes of codes, a scale and the id.

use std::collections::HashMap;

/// One stored vector's owner and kind, as `vec_memories` records them.
#[derive(Debug, Clone)]
pub(crate) struct VectorRow {
    pub memory_id: String,
    pub user_id: String,
    pub kind: String,
    pub vector: Vec<f32>,
}

/// The mirror row id of the `ordinal`-th sentence key of `memory_id` (a second mirror holds
/// the sentence keys, see `crate::sentence_keys`).
pub(crate) fn sentence_key(memory_id: &str, ordinal: usize) -> String {
    format!("{memory_id}#{ordinal}")
}

/// The memory a sentence key's row id belongs to.
pub(crate) fn memory_of_sentence(key: &str) -> &str {
    key.rsplit_once('#').map_or(key, |(memory_id, _)| memory_id)
}

/// Which rows a query may return, applied inside the scan.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct VectorFilter<'a> {
    pub user_id: Option<&'a str>,
    pub kind: Option<&'a str>,
}

/// One owner's rows, in the order they were stored.
#[derive(Debug, Default)]
struct Partition {
    ids: Vec<String>,
    kinds: Vec<u32>,
    /// `words` u64 words of sign bits per row.
    bits: Vec<u64>,
    /// `dimensions` codes per row.
    codes: Vec<i8>,
    scales: Vec<f32>,
    alive: Vec<bool>,
    dead: usize,
}

impl Partition {
    /// Drops the dead rows, keeping the order of the others; returns the live rows' new
    /// positions by id.
    fn compact(&mut self, words: usize, dims: usize) -> Vec<(String, usize)> {
        let mut kept = 0;
        for position in 0..self.ids.len() {
            if !self.alive[position] {
                continue;
            }
            if kept != position {
                self.ids.swap(kept, position);
                self.kinds[kept] = self.kinds[position];
                self.scales[kept] = self.scales[position];
                self.alive[kept] = true;
                self.bits
                    .copy_within(position * words..(position + 1) * words, kept * words);
                self.codes
                    .copy_within(position * dims..(position + 1) * dims, kept * dims);
            }
            kept += 1;
        }
        self.ids.truncate(kept);
        self.kinds.truncate(kept);
        self.scales.truncate(kept);
        self.alive.truncate(kept);
        self.bits.truncate(kept * words);
        self.codes.truncate(kept * dims);
        self.dead = 0;
        self.ids
            .iter()
            .enumerate()
            .map(|(position, id)| (id.clone(), position))
            .collect()
    }
}

/// Where a row is: its owner's partition and its place there.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Place {
    partition: u32,
    position: usize,
}

/// The mirror, its generation, and the rows it holds.
#[derive(Debug, Default)]
pub(crate) struct QuantizedIndex {
    /// The `vector_generation` this mirror reflects; `None` until loaded.
    generation: Option<i64>,
    dimensions: usize,
    /// u64 words of sign bits per row.
    words: usize,
    partitions: Vec<Partition>,
    /// The partition of each owner.
    owners: HashMap<String, u32>,
    /// The number of each kind name.
    kinds: HashMap<String, u32>,
    places: HashMap<String, Place>,
    /// Live rows in all partitions.
    live: usize,
}

/// Sign bits of `vector`, packed into u64 words.
fn sign_bits(vector: &[f32], words: usize) -> Vec<u64> {
    let mut bits = vec![0_u64; words];
    for (index, value) in vector.iter().enumerate() {
        if *value > 0.0 {
            bits[index / 64] |= 1 << (index % 64);
        }
    }
    bits
}

/// Symmetric 8-bit codes of `vector` and their scale (value ≈ code × scale).
fn int8_codes(vector: &[f32]) -> (Vec<i8>, f32) {
    let largest = vector
        .iter()
        .fold(0.0_f32, |acc, value| acc.max(value.abs()));
    if largest == 0.0 || !largest.is_finite() {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = largest / 127.0;
    let codes = vector
        .iter()
        .map(|value| (value / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (codes, scale)
}

/// The name numbers of a map (owners, kinds): the next free one for a new name.
fn number_of(names: &mut HashMap<String, u32>, name: &str) -> u32 {
    if let Some(number) = names.get(name) {
        return *number;
    }
    let number = names.len() as u32;
    names.insert(name.to_owned(), number);
    number
}

impl QuantizedIndex {
    /// The generation this mirror reflects, if loaded.
    pub(crate) fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// Rows held (live ones).
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Approximate heap bytes held, for the benchmark's report.
    pub(crate) fn heap_bytes(&self) -> usize {
        let rows: usize = self
            .partitions
            .iter()
            .map(|partition| {
                partition.bits.len() * 8
                    + partition.codes.len()
                    + partition.scales.len() * 4
                    + partition.kinds.len() * 4
                    + partition.alive.len()
                    + partition.ids.iter().map(|id| id.len() + 24).sum::<usize>() * 2
                    + std::mem::size_of::<Partition>()
            })
            .sum();
        rows + self.places.len() * std::mem::size_of::<Place>()
            + self
                .owners
                .keys()
                .map(|owner| owner.len() + 28)
                .sum::<usize>()
    }

    /// An empty mirror for `dimensions`-long vectors, not yet at any generation.
    pub(crate) fn empty(dimensions: usize) -> Self {
        Self {
            dimensions,
            words: dimensions.div_ceil(64),
            ..Self::default()
        }
    }

    /// Adds one row while loading (see [`Self::empty`] and [`Self::loaded_at`]).
    pub(crate) fn push(&mut self, row: VectorRow) {
        self.upsert(row);
    }

    /// Marks a freshly filled mirror as reflecting `generation`.
    pub(crate) fn loaded_at(mut self, generation: i64) -> Self {
        self.generation = Some(generation);
        self
    }

    /// Replaces everything with `rows` at `generation`.
    #[cfg(test)]
    fn load(&mut self, generation: i64, dimensions: usize, rows: Vec<VectorRow>) {
        let mut fresh = Self::empty(dimensions);
        for row in rows {
            fresh.push(row);
        }
        *self = fresh.loaded_at(generation);
    }

    /// Forgets everything; the next search reloads.
    pub(crate) fn invalidate(&mut self) {
        *self = Self::default();
    }

    /// Adds or replaces one row, at the end of its owner's partition; a vector of the wrong
    /// length is ignored (the table has the mirror's dimension by construction).
    fn upsert(&mut self, row: VectorRow) {
        if row.vector.len() != self.dimensions {
            return;
        }
        self.remove(&row.memory_id);
        let owner = number_of(&mut self.owners, &row.user_id);
        if owner as usize == self.partitions.len() {
            self.partitions.push(Partition::default());
        }
        let kind = number_of(&mut self.kinds, &row.kind);
        let (codes, scale) = int8_codes(&row.vector);
        let partition = &mut self.partitions[owner as usize];
        partition.bits.extend(sign_bits(&row.vector, self.words));
        partition.codes.extend(codes);
        partition.scales.push(scale);
        partition.kinds.push(kind);
        partition.alive.push(true);
        let place = Place {
            partition: owner,
            position: partition.ids.len(),
        };
        partition.ids.push(row.memory_id.clone());
        self.places.insert(row.memory_id, place);
        self.live += 1;
    }

    /// Marks a row gone; compacts its partition once a quarter of its rows are gone (at least
    /// 16 of them, or all): each compaction costs the partition's size, paid for by the rows
    /// it drops, and a store of many small owners is compacted too.
    fn remove(&mut self, memory_id: &str) {
        let Some(place) = self.places.remove(memory_id) else {
            return;
        };
        self.live -= 1;
        let partition = &mut self.partitions[place.partition as usize];
        partition.alive[place.position] = false;
        partition.dead += 1;
        if partition.dead * 4 > partition.ids.len()
            && (partition.dead >= 16 || partition.dead == partition.ids.len())
        {
            for (id, position) in partition.compact(self.words, self.dimensions) {
                self.places.insert(
                    id,
                    Place {
                        partition: place.partition,
                        position,
                    },
                );
            }
        }
    }

    /// Applies a committed write that moved the stored generation from `before` to `after`:
    /// if the mirror was at `before`, it takes the rows and moves to `after`; if it is already
    /// at `after` (a search reloaded in between) nothing is needed; otherwise it is stale and
    /// the next search reloads.
    pub(crate) fn apply(&mut self, before: i64, after: i64, rows: Vec<VectorRow>) {
        match self.generation {
            Some(current) if current == before => {
                for row in rows {
                    self.upsert(row);
                }
                self.generation = Some(after);
            }
            Some(current) if current == after => {}
            _ => self.invalidate(),
        }
    }

    /// Drops rows whose memories were deleted (committed). Deletions do not move the
    /// generation: a mirror in another process that still holds them returns ids the caller's
    /// filters drop, since the memories are no longer active.
    pub(crate) fn remove_all(&mut self, memory_ids: &[String]) {
        for id in memory_ids {
            self.remove(id);
        }
    }

    /// Drops the sentence keys of these memories (rows `sentence_key(id, 0)`, `1`, … up to the
    /// first missing one).
    pub(crate) fn remove_sentences_of(&mut self, memory_ids: &[String]) {
        for id in memory_ids {
            for ordinal in 0.. {
                let key = sentence_key(id, ordinal);
                if !self.places.contains_key(&key) {
                    break;
                }
                self.remove(&key);
            }
        }
    }

    /// The stored vector of `memory_id` as its 8-bit codes give it back (each value within
    /// half a code step of the float), or `None` when the mirror holds no live row for it.
    pub(crate) fn approximate_vector(&self, memory_id: &str) -> Option<Vec<f32>> {
        let place = *self.places.get(memory_id)?;
        let partition = &self.partitions[place.partition as usize];
        let dims = self.dimensions;
        let scale = partition.scales[place.position];
        Some(
            partition.codes[place.position * dims..(place.position + 1) * dims]
                .iter()
                .map(|code| f32::from(*code) * scale)
                .collect(),
        )
    }

    /// The cosine similarity of the unit `query` to the row at `position` of `partition`, from
    /// its codes.
    fn code_similarity(&self, partition: &Partition, position: usize, query: &[f32]) -> f32 {
        let dims = self.dimensions;
        let codes = &partition.codes[position * dims..(position + 1) * dims];
        let dot: f32 = codes
            .iter()
            .zip(query)
            .map(|(code, value)| f32::from(*code) * value)
            .sum();
        dot * partition.scales[position]
    }

    /// The `k` rows nearest to `query` (a unit vector) that pass `filter`, with their cosine
    /// similarity, best first: the `k × oversample` nearest by Hamming distance between sign
    /// bits, re-scored with the 8-bit codes. With an owner, only that owner's partition is
    /// read.
    pub(crate) fn search(
        &self,
        query: &[f32],
        filter: VectorFilter<'_>,
        k: usize,
        oversample: usize,
    ) -> Vec<(String, f32)> {
        if query.len() != self.dimensions || k == 0 || self.live == 0 {
            return Vec::new();
        }
        let partitions: Vec<&Partition> = match filter.user_id {
            Some(user) => match self.owners.get(user) {
                Some(owner) => vec![&self.partitions[*owner as usize]],
                None => return Vec::new(),
            },
            None => self.partitions.iter().collect(),
        };
        let kind = match filter.kind {
            Some(kind) => match self.kinds.get(kind) {
                Some(id) => Some(*id),
                None => return Vec::new(),
            },
            None => None,
        };
        let query_bits = sign_bits(query, self.words);
        let words = self.words;
        // Hamming distance of every eligible row (u16::MAX for the others), with a histogram of
        // the distances: the shortlist is every row below the distance where the histogram
        // reaches `k × oversample`, plus enough rows at that distance. No sort of all rows.
        let ineligible = u16::MAX;
        let mut histogram = vec![0_usize; words * 64 + 1];
        let distances: Vec<Vec<u16>> = partitions
            .iter()
            .map(|partition| {
                partition
                    .bits
                    .chunks_exact(words)
                    .enumerate()
                    .map(|(position, row_bits)| {
                        if !partition.alive[position]
                            || kind.is_some_and(|kind| partition.kinds[position] != kind)
                        {
                            return ineligible;
                        }
                        let distance: u32 = row_bits
                            .iter()
                            .zip(&query_bits)
                            .map(|(a, b)| (a ^ b).count_ones())
                            .sum();
                        histogram[distance as usize] += 1;
                        distance as u16
                    })
                    .collect()
            })
            .collect();
        let eligible: usize = histogram.iter().sum();
        let shortlist = k.saturating_mul(oversample.max(1)).min(eligible);
        if shortlist == 0 {
            return Vec::new();
        }
        let mut below = 0;
        let mut cutoff = 0;
        for (distance, count) in histogram.iter().enumerate() {
            if below + count >= shortlist {
                cutoff = distance;
                break;
            }
            below += count;
        }
        let mut at_cutoff = shortlist - below;
        let mut rescored: Vec<(f32, usize, usize)> = Vec::with_capacity(shortlist);
        for (slot, partition_distances) in distances.iter().enumerate() {
            for (position, &distance) in partition_distances.iter().enumerate() {
                let distance = usize::from(distance);
                let kept = if distance < cutoff {
                    true
                } else if distance == cutoff && at_cutoff > 0 {
                    at_cutoff -= 1;
                    true
                } else {
                    false
                };
                if kept {
                    let similarity = self.code_similarity(partitions[slot], position, query);
                    rescored.push((similarity, slot, position));
                }
            }
        }
        rescored.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        rescored
            .into_iter()
            .take(k)
            .map(|(similarity, slot, position)| {
                (partitions[slot].ids[position].clone(), similarity)
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn unit(values: &[f32]) -> Vec<f32> {
        let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt();
        values.iter().map(|v| v / norm).collect()
    }

    fn row(id: &str, user: &str, vector: Vec<f32>) -> VectorRow {
        VectorRow {
            memory_id: id.to_owned(),
            user_id: user.to_owned(),
            kind: "episode".to_owned(),
            vector,
        }
    }

    /// A deterministic pseudo-random unit vector.
    pub(crate) fn pseudo(seed: u64, dims: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let values: Vec<f32> = (0..dims)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 2_001) as f32 / 1_000.0 - 1.0
            })
            .collect();
        unit(&values)
    }

    #[test]
    fn finds_the_exact_nearest_and_scores_cosine() {
        let mut index = QuantizedIndex::default();
        let rows = (0..500)
            .map(|n| row(&format!("m{n}"), "u", pseudo(n, 64)))
            .collect();
        index.load(1, 64, rows);
        let query = pseudo(42, 64);
        let hits = index.search(&query, VectorFilter::default(), 3, 20);
        assert_eq!(hits[0].0, "m42");
        assert!((hits[0].1 - 1.0).abs() < 0.01, "cosine {}", hits[0].1);
        assert!(hits[1].1 < hits[0].1);
    }

    #[test]
    fn filters_by_owner_and_forgets_removed_rows() {
        let mut index = QuantizedIndex::default();
        index.load(
            1,
            8,
            vec![
                row(
                    "a",
                    "alice",
                    unit(&[1.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
                ),
                row("b", "bob", unit(&[1.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0])),
            ],
        );
        let query = unit(&[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let bob = VectorFilter {
            user_id: Some("bob"),
            kind: None,
        };
        let ids: Vec<String> = index
            .search(&query, bob, 5, 4)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids, ["b"]);
        let nobody = VectorFilter {
            user_id: Some("carol"),
            kind: None,
        };
        assert!(index.search(&query, nobody, 5, 4).is_empty());
        index.remove_all(&["b".to_owned()]);
        assert!(index.search(&query, bob, 5, 4).is_empty());
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn drops_every_sentence_key_of_a_memory() {
        let mut index = QuantizedIndex::default();
        let keys = ["m#0", "m#1", "m#2", "mm#0", "n#0"];
        index.load(
            1,
            4,
            keys.iter()
                .map(|key| row(key, "u", unit(&[1.0, 0.0, 0.0, 0.0])))
                .collect(),
        );
        index.remove_sentences_of(&["m".to_owned(), "absent".to_owned()]);
        let mut left: Vec<String> = index
            .search(&unit(&[1.0, 0.0, 0.0, 0.0]), VectorFilter::default(), 10, 4)
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        left.sort();
        assert_eq!(left, ["mm#0", "n#0"]);
        assert_eq!(memory_of_sentence("mm#0"), "mm");
        assert_eq!(sentence_key("n", 3), "n#3");
    }

    #[test]
    fn applies_only_the_next_generation() {
        let mut index = QuantizedIndex::default();
        index.load(3, 4, vec![row("a", "u", unit(&[1.0, 0.0, 0.0, 0.0]))]);
        index.apply(3, 4, vec![row("b", "u", unit(&[0.0, 1.0, 0.0, 0.0]))]);
        assert_eq!(index.generation(), Some(4));
        assert_eq!(index.len(), 2);
        // A write this mirror did not see: it must reload rather than guess.
        index.apply(6, 7, vec![row("c", "u", unit(&[0.0, 0.0, 1.0, 0.0]))]);
        assert_eq!(index.generation(), None);
    }

    #[test]
    fn compaction_keeps_the_live_rows_searchable() {
        let mut index = QuantizedIndex::default();
        let rows = (0..3_000)
            .map(|n| row(&format!("m{n}"), "u", pseudo(n, 32)))
            .collect();
        index.load(1, 32, rows);
        let gone: Vec<String> = (0..2_000).map(|n| format!("m{n}")).collect();
        index.remove_all(&gone);
        assert_eq!(index.len(), 1_000);
        assert!(
            index.partitions[0].ids.len() < 3_000,
            "dead rows were compacted away"
        );
        let hits = index.search(&pseudo(2_500, 32), VectorFilter::default(), 1, 50);
        assert_eq!(hits[0].0, "m2500");
    }

    #[test]
    fn an_owners_answer_is_the_same_whatever_other_owners_hold() {
        let own: Vec<VectorRow> = (0..300)
            .map(|n| row(&format!("a{n}"), "alice", pseudo(n, 64)))
            .collect();
        let mut alone = QuantizedIndex::default();
        alone.load(1, 64, own.clone());
        // The same rows among many more of other owners, stored before, between and after.
        let mut shared_rows = Vec::new();
        for (n, mine) in own.into_iter().enumerate() {
            shared_rows.push(row(&format!("b{n}"), "bob", pseudo(10_000 + n as u64, 64)));
            shared_rows.push(mine);
            shared_rows.push(row(
                &format!("c{n}"),
                "carol",
                pseudo(20_000 + n as u64, 64),
            ));
        }
        let mut shared = QuantizedIndex::default();
        shared.load(1, 64, shared_rows);
        let alice = VectorFilter {
            user_id: Some("alice"),
            kind: None,
        };
        for seed in [7, 99, 30_001] {
            let query = pseudo(seed, 64);
            assert_eq!(
                shared.search(&query, alice, 10, 2),
                alone.search(&query, alice, 10, 2)
            );
        }
        // Without an owner, every partition is read.
        let everyone = shared.search(&pseudo(10_005, 64), VectorFilter::default(), 1, 4);
        assert_eq!(everyone[0].0, "b5");
    }
}
