//! The bench's synthetic data: chat turns of one to three templated sentences naming people,
//! places, plans and numbers, questions about them, and vectors mixed from real embeddings, all
//! from a small deterministic generator so that every run sees the same data.

pub(super) const NAMES: [&str; 24] = [
    "Dana", "Robert", "Maya", "Priya", "Tom", "Sarah", "Lukas", "Aiko", "Omar", "Elena", "Jonas",
    "Fatima", "Chen", "Ines", "Marco", "Nadia", "Pavel", "Grace", "Yusuf", "Lena", "Hugo", "Zara",
    "Kofi", "Mila",
];
pub(super) const PLACES: [&str; 16] = [
    "Lisbon", "Porto", "Berlin", "Kyoto", "Nairobi", "Lima", "Oslo", "Austin", "Seville", "Hanoi",
    "Dublin", "Quito", "Tbilisi", "Perth", "Bergen", "Cusco",
];
pub(super) const THINGS: [&str; 20] = [
    "the aquarium job",
    "a pottery class",
    "the marathon",
    "the dentist",
    "a birthday dinner",
    "the new apartment",
    "a jazz concert",
    "the quarterly report",
    "a hiking trip",
    "the wedding",
    "the car repair",
    "a chess tournament",
    "the book club",
    "a job interview",
    "the garden",
    "the flight booking",
    "a cooking course",
    "the violin lessons",
    "the tax return",
    "a museum visit",
];
pub(super) const TEMPLATES: [&str; 8] = [
    "{n} told me about {t} in {p} last week",
    "I need to remember {t} with {n} on day {d}",
    "Can you remind me what {n} said about {p}?",
    "We talked about {t} and {n} seemed happy about it",
    "My friend {n} is moving to {p} after {t}",
    "Note: {t} costs {d} euros, {n} will pay half",
    "Yesterday {n} and I planned {t} near {p}",
    "Sure, I will keep {t} in mind for {n} ({d})",
];
pub(crate) const QUERY_TEMPLATES: [&str; 5] = [
    "what did {n} say about {p}",
    "when is {t}",
    "who is moving to {p}",
    "how much does {t} cost",
    "plans with {n}",
];

/// Questions in the first person, which read the sentence keys too.
pub(crate) const FIRST_PERSON_TEMPLATES: [&str; 4] = [
    "what did I tell {n} about {t}",
    "when did I plan {t}",
    "am I still going to {p}",
    "what do I need for {t}",
];

/// A small deterministic generator (xorshift64*), so every run sees the same data.
pub(crate) struct Random(pub(crate) u64);

impl Random {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    pub(crate) fn fill(&mut self, template: &str) -> String {
        template
            .replace("{n}", self.pick(&NAMES))
            .replace("{p}", self.pick(&PLACES))
            .replace("{t}", self.pick(&THINGS))
            .replace("{d}", &(self.next() % 500 + 1).to_string())
    }

    /// A value in [-1, 1].
    fn signed_unit(&mut self) -> f32 {
        (self.next() % 20_001) as f32 / 10_000.0 - 1.0
    }

    /// A vector from the real model's distribution without running the model: a mix of two
    /// real embeddings plus a little noise, normalised (keeps the embeddings' common direction
    /// and spread, which is what makes quantised search easy or hard).
    pub(super) fn mixed_vector(&mut self, pool: &[Vec<f32>]) -> Vec<f32> {
        let first = &pool[(self.next() % pool.len() as u64) as usize];
        let second = &pool[(self.next() % pool.len() as u64) as usize];
        let mut vector: Vec<f32> = first
            .iter()
            .zip(second)
            .map(|(a, b)| 0.8 * a + 0.4 * b + 0.03 * self.signed_unit())
            .collect();
        let norm = vector
            .iter()
            .map(|value| value * value)
            .sum::<f32>()
            .sqrt()
            .max(1e-6);
        vector.iter_mut().for_each(|value| *value /= norm);
        vector
    }

    /// A chat turn of one to three sentences.
    pub(crate) fn turn(&mut self) -> String {
        let sentences = 1 + (self.next() % 3) as usize;
        (0..sentences)
            .map(|_| {
                let template = self.pick(&TEMPLATES);
                self.fill(template)
            })
            .collect::<Vec<_>>()
            .join(". ")
    }
}
