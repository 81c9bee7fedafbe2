//! Questions that want the agent's own words: what it said, or its advice.
//!
//! Search weighs the agent's turns below the user's (`origin_weights.agent`): as evidence of
//! what is true of the user, the agent's words count for less than the user's own. Two kinds of
//! question are the exception, and search weighs the agent's turns like the user's for them (the
//! context block still marks them "said by the agent"):
//! - about what the agent said: in "what was the Jamaican dish you recommended?" or "in our
//!   previous conversation about the Library of Babel, what did Borges say …?" its turns are the
//!   thing asked for, not a claim about the user;
//! - asking for its advice: in "my phone's battery dies fast, any tips?" what it advised before
//!   on the subject is what a new answer builds on, and the path to what the user said then.
//!
//! On LongMemEval_S dev, where one question in nine is about the assistant's words and one in
//! sixteen asks for advice, see docs/BENCHMARKS.md, "Trust by source".
//!
//! Understood, case-insensitively, in English (like the periods of `when.rs`):
//! - the agent's acts of speech: "you mentioned", "you've recommended", "did you say",
//!   "have you ever suggested";
//! - its answers: "your recommendation", "your list of …";
//! - a past conversation with it: "our previous conversation", "the chat I had with you",
//!   "you and I talked about" (not "the last conversation", "we talked about": with whom?);
//! - a request for advice: "Any tips?" (opening a sentence: "did my doctor have any advice?"
//!   asks about the user), "can you suggest …", "what would you recommend", "do you have
//!   suggestions".

use std::sync::OnceLock;

use regex::Regex;

/// Verbs of saying in the simple past: "you mentioned", "you gave".
const SAID: &str = "said|mentioned|told|recommended|suggested|provided|gave|listed|wrote\
|created|shared|explained|described|proposed|offered|named|showed|quoted|cited|generated\
|drafted|composed|advised|included|came up with|put together|pointed out|talked about\
|brought up|called";

/// The participles that differ from the past, after "have": "you've given", "have you shown".
/// Not after a bare "you": "I sent you written instructions" is about the user.
const PARTICIPLES: &str = "given|written|shown|come up with";

/// The same verbs' base forms, after "did you": "did you say". Not after "do", "can" or
/// "could": "do you recommend …?", "can you tell me …?" ask for something new.
const SAY: &str = "say|mention|tell|recommend|suggest|provide|give|list|write|create|share\
|explain|describe|propose|offer|name|show|quote|cite|generate|draft|compose|advise|include\
|come up with|put together|point out|talk about|bring up|call";

/// A word that may stand between "you" and the verb: "you also mentioned", "did you ever say".
const BETWEEN: &str = "also|just|previously|earlier|once|ever|already|recently|first|last|then\
|actually|originally|initially|specifically";

/// What the agent gives as an answer: "your recommendation".
const ANSWERS: &str = "answer|answers|suggestion|suggestions|recommendation|recommendations\
|advice|reply|replies|response|responses|list|explanation|summary|example|examples|tips|idea\
|ideas|proposal|draft|version";

/// What someone asking for advice asks for: "any tips?".
const ADVICE: &str = "tip|tips|suggestion|suggestions|advice|idea|ideas|recommendation\
|recommendations|pointers";

/// A conversation with the agent, when it is "our" conversation: "the last conversation with
/// my landlord" is the user's.
const CONVERSATIONS: &str = "conversation|conversations|chat|chats|discussion|discussions";

fn cues() -> &'static Regex {
    static CUES: OnceLock<Regex> = OnceLock::new();
    CUES.get_or_init(|| {
        // Verbose mode ignores spaces: the several-word verbs match any run of whitespace.
        let [said, participles, say, between] =
            [SAID, PARTICIPLES, SAY, BETWEEN].map(|words| words.replace(' ', r"\s+"));
        // What was said: the agent's acts of speech, its answers, a conversation with it.
        // Asking for advice: a sentence that opens with "any tips", followed by nothing, a
        // question mark or what the advice is on ("Any advice my doctor gave me?" asks about
        // the user); "can you suggest"; "what would you recommend"; "do you have tips";
        // "I need some advice" (not "I need the recommendation letter").
        let pattern = format!(
            r"(?imx)
            \byou\s+(?:(?:{between})\s+)?(?:{said})\b
            | \byou(?:['’]ve|['’]d|\s+have|\s+had)\s+(?:(?:{between})\s+)?(?:{said}|{participles})\b
            | \b(?:have|had)\s+you\s+(?:(?:{between})\s+)?(?:{said}|{participles})\b
            | \b(?:did|didn['’]t)\s+you\s+(?:(?:{between})\s+)?(?:{say})\b
            | \byour\s+(?:\w+\s+)?(?:{ANSWERS})\b
            | \bour\s+(?:(?:previous|last|earlier|prior|past|other|recent|first)\s+)?(?:{CONVERSATIONS})\b
            | \b(?:{CONVERSATIONS})\s+(?:you\s+and\s+i\s+had|(?:i|we)\s+had\s+with\s+you)\b
            | \byou\s+and\s+i\s+(?:talked|spoke|chatted|discussed)\b
            | \b(?:talked|spoke|chatted|discussed)\s+(?:\w+\s+)?with\s+you\b
            | (?:^|[.!?;:,()\-–—]\s*)(?:got\s+)?any\s+(?:\w+\s+){{0,2}}(?:{ADVICE})\s*
              (?:[?.!]|$|\b(?:on|for|about|regarding|to|you)\b)
            | \b(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:suggest|recommend|advise)\b
            | \b(?:can|could|would|will)\s+you\s+(?:please\s+)?give\s+me\s+(?:some|any|a\s+few|your)\s+
              (?:\w+\s+){{0,2}}(?:{ADVICE})\b
            | \bwhat\s+(?:would|do|should|could)\s+you\s+(?:suggest|recommend|advise)\b
            | \bwhat\s+are\s+(?:some|a\s+few|your|the\s+best)\s+(?:\w+\s+){{0,2}}(?:{ADVICE})\b
            | \b(?:do|would|have)\s+you\s+(?:got|have)\s+(?:\w+\s+){{0,2}}(?:{ADVICE})\b
            | \bi(?:\s+need|\s+want|\s+would\s+(?:like|love)|['’]d\s+(?:like|love)|\s+could\s+use)\s+
              (?:(?:some|any|a\s+few|your|more)\s+(?:\w+\s+){{0,2}})?(?:{ADVICE})\b"
        );
        // The pattern is a constant; building it cannot fail at run time once a test has built it.
        Regex::new(&pattern).expect("the agent's-words pattern is valid")
    })
}

/// True when `query` asks what the agent said, or for its advice: its words are then wanted,
/// not weighed as claims about the user.
pub(crate) fn asks_for_agents_words(query: &str) -> bool {
    cues().is_match(query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_about_the_agents_words_are_recognised() {
        for query in [
            "What was the name of that Jamaican dish you recommended I try?",
            "I'm going back to our previous conversation about music theory. Can you remind me of the website?",
            "I remember you provided a list of 100 prompt parameters.",
            "how many eggs did you say we need for the recipe?",
            "What song you said best exemplified the band's sound?",
            "Have you ever suggested a book about sailing?",
            "Remind me of your recommendation for a hotel in Porto.",
            "In the last chat I had with you, which store was it?",
            "You and I talked about dinosaurs, what colour was the Plesiosaur?",
            "You also mentioned a Soviet cartoon.",
            "I've been having trouble with the battery life on my phone lately. Any tips?",
            "Can you suggest some activities I can do during my commute to work?",
            "I am planning another theme park weekend; do you have any suggestions?",
            "What would you recommend for a rainy afternoon in Porto?",
            "What do you recommend for dinner tonight?",
            "I'd like some advice on repotting a fern.",
            "Do you have any other tips?",
            "I'm going to Paris next month—any recommendations?",
            "Could you give me some tips for a long flight?",
            "What are some tips for keeping basil alive?",
            "Got any ideas for a birthday present?",
            "Going back to our conversation about Rome, which museum was it?",
            "What did I say when I talked with you about my knee?",
            "You've given me a recipe for bread once, what flour was it?",
            "Which hotel didn’t you recommend, the one by the sea?",
            "The recipe you came up  with last time, how long did it bake?",
        ] {
            assert!(asks_for_agents_words(query), "{query}");
        }
    }

    #[test]
    fn questions_about_the_user_are_not() {
        for query in [
            "How long did I wait for the decision on my asylum application?",
            "Where did I go on holiday last summer?",
            "What did my sister recommend for the trip?",
            "Can you remind me when my dentist appointment is?",
            "What do you know about my job?",
            "What did Melanie paint in July 2023?",
            "How many sessions with my trainer did I have last month?",
            "Who told me about the concert?",
            "Can you tell me what I said about the flat?",
            "Could you list my appointments?",
            "Did my doctor have any advice about the knee?",
            "What did I agree to in the last conversation with my landlord?",
            "What did we decide in the discussion we had at work?",
            "When my sister visited, we talked about moving; where to?",
            "At work we discussed the new budget. How much was it?",
            "Any advice my doctor gave me about the knee?",
            "Any recommendations from my sister for the trip?",
            "I need the recommendation letter from Prof. Li.",
            "I want the advice my physiotherapist gave me.",
            "I sent you written instructions from my landlord, what was the deadline?",
            "I told you I said no to the job offer, right?",
        ] {
            assert!(!asks_for_agents_words(query), "{query}");
        }
    }
}
