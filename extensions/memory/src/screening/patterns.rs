//! The phrases and shapes of text that speaks to the agent instead of about the user: telling
//! it to drop its instructions, giving it another role, standing orders about "the user",
//! sending data away, asking for its prompt, and imitations of tool calls and chat-format
//! markers. Each family is a list of case-insensitive regular expressions over the text with
//! its HTML entities decoded, each tried alone (a `RegexSet` of them all was slower), and only
//! where the text holds the words it needs (`prefilter.rs`).
//!
//! What a user says to their own assistant about themselves ("ignore my previous message",
//! "always remind me to take my pills", "from now on call me Sam") is not matched: the patterns
//! look for the agent's instructions, prompt or rules, for "the user" in the third person, and
//! for data or links sent elsewhere.

use std::sync::LazyLock;

use regex::Regex;

use super::prefilter::Prefilter;
use super::Reason;

/// Words that qualify the instructions an override names (`ignore all previous instructions`);
/// "my" is left out, so that a user taking back their own words is not matched, and so is a
/// bare "the", so that "forget the instructions on the box" is not.
const QUALIFIERS: &str = "all|any|every|your|these|those|previous|prior|above|earlier|preceding|\
following|initial|original|old|system|safety|developer|existing|other|former|preset|programmed|\
current|given|default|standing|hidden|built-in|ethical|moral|content";

/// What an override tells the agent to drop.
const RULES: &str =
    "instructions?|directions|directives?|guidelines|system\\s+prompts?|prompts?|programming|\
guardrails|rules|restrictions|constraints|commands|orders|policies|filters|training";

/// Each family's patterns, as written (`\b` is an ASCII word boundary). The pattern
/// families were written from the public corpora's shapes and tuned on
/// `tests/data/injection/dev.jsonl` and `train.jsonl` only; `test.jsonl` measures them.
fn families() -> Vec<(Reason, Vec<String>)> {
    let override_verb = "ignore|disregard|forget|override|bypass|discard|neglect|abandon|drop";
    vec![
        (
            Reason::HiddenCharacters,
            vec![
                r#"style\s*=\s*["'][^"']*(?:color\s*:\s*(?:white|#fff(?:fff)?)\b|font-size\s*:\s*(?:0*[01](?:\.\d+)?\s*(?:px|pt)|0(?:\.0+)?\s*(?:[;\x22']|$))|display\s*:\s*none|visibility\s*:\s*hidden|opacity\s*:\s*0(?:\.0+)?\b)"#.into(),
            ],
        ),
        (
            Reason::InstructionOverride,
            vec![
                format!(
                    r"\b(?:{override_verb})\s+(?:(?:the|of|and|to|its|their)\s+)*(?:(?:{QUALIFIERS})\s+(?:(?:the|of|and|to)\s+)*)+(?:{RULES})\b"
                ),
                format!(r"\b(?:{override_verb})\s+(?:everything|anything|all)\s+(?:(?:you\s+(?:were|have\s+been)\s+(?:told|given|instructed))|(?:above|before|previously|said\s+(?:before|above)))"),
                r"\b(?:ignore|disregard)\s+(?:all\s+)?instructions\b".into(),
                r"\b(?:ignore|disregard)\s+the\s+user'?s?\b".into(),
                r"\bignore\s+(?:them|it|this|these|those|everything\s+else)\s+and\s+instead\b".into(),
                r"\bignore\s+the\s+rest\s+of\s+(?:this|the)\b[^.\n]{0,40}?\band\s+(?:just\s+)?(?:print|say|output|respond|reply|write)\b".into(),
                r"\b(?:new|updated|revised|real|actual|true|additional|secret|hidden|priority|legitimate)\s+(?:instructions?|directives?|system\s+prompt|orders)\s*:".into(),
                r"\b(?:do\s+not|don't|never|stop)\s+(?:follow(?:ing)?|obey(?:ing)?|listen(?:ing)?\s+to)\s+(?:your|the|any|those|these)\s+(?:previous\s+|original\s+|system\s+|safety\s+|initial\s+)?(?:instructions|rules|guidelines|prompt|developers?|creators?|programming|policies)".into(),
                r"\byour\s+(?:new|real|true|actual|only|primary|updated)\s+(?:task|goal|purpose|instructions?|objective|mission|role|job|orders)\s+(?:is|are|will\s+be|now)\b".into(),
                r"\byour\s+(?:earlier|previous|original|prior|old|initial)\s+(?:instructions|rules|guidelines|orders)\s+(?:were|are|have\s+been)\b".into(),
                r"\b(?:guidelines|rules|restrictions|policies|instructions|filters|safeguards)\s+(?:are|have\s+been)\s+(?:now\s+)?(?:suspended|lifted|disabled|revoked|removed|void|obsolete|cancell?ed|overridden)\b".into(),
                r"\bthe\s+(?:legitimate|real|actual|true)\s+(?:operator|developer|admin|administrator|owner)\s+says\b".into(),
                r"\b(?:instead|now)\s*,?\s+(?:just\s+)?(?:print|say|output|respond\s+with|reply\s+with|write)\s+(?:only\s+)?[\x22'\u{201C}]".into(),
                r"\bstop\s+everything\s*[!.]*\s*(?:now\b|!)".into(),
                r"\b(?:haha\s+pwned|i\s+have\s+been\s+pwned)\b".into(),
                r"\bdecode\s+(?:this|the\s+following|it)\s+and\s+(?:do|follow|execute|obey|carry\s+out)\b".into(),
                r"\btreat\s+(?:it|this|these)\s+as\s+(?:an?\s+)?(?:[\w-]+\s+)?(?:instructions?|commands?|orders?|rules?)\b".into(),
                r"\b(?:higher|highest|top)[\s-]priority\s+(?:instruction|command|order|than\s+(?:anything|the\s+user))".into(),
                r"\b(?:ignore[rz]?|oublie[rz]?|oubliez)\s+(?:toutes\s+)?(?:les\s+|tes\s+|vos\s+)?(?:instructions|consignes|r\u{E8}gles)\b".into(),
                r"\b(?:ignoriere|ignorieren\s+sie|vergiss|vergessen\s+sie|missachte)\s+(?:(?:alle|die|deine|ihre|vorherigen|bisherigen|obigen|vorigen)\s+)*(?:anweisungen|instruktionen|regeln|befehle|vorgaben)\b".into(),
                r"\bvergiss\s+alles\s*,?\s+was\s+(?:dir|ihnen)\b".into(),
                r"\bneue\s+anweisung(?:en)?\s*:".into(),
                r"\b(?:ignora|ignore|olvida|olvide|descarta|ignorar)\s+(?:(?:todas|todos|las|los|tus|sus|anteriores|previas)\s+)*(?:instrucciones|reglas|indicaciones|\u{F3}rdenes)\b".into(),
                r"\b(?:ignora|dimentica)\s+(?:(?:tutte|le|tue|precedenti)\s+)*(?:istruzioni|regole)\b".into(),
                r"\b(?:ignore|esque\u{E7}a)\s+(?:(?:todas|as|suas)\s+)*(?:instru\u{E7}\u{F5}es|regras)\b".into(),
                r"\bnegeer\s+(?:(?:alle|de|eerdere|vorige|je|jouw)\s+)*(?:instructies|regels|opdrachten)\b".into(),
                r"(?:忽略|无视|忘记)(?:之前|以前|上面|先前|前面)?的?(?:所有|全部|一切)?(?:的)?(?:指令|指示|说明|规则|提示)".into(),
            ],
        ),
        (
            Reason::RoleHijack,
            vec![
                r"\byou\s+are\s+(?:now\s+)?(?:free|freed|unrestricted|unfiltered|uncensored|unchained|jailbroken|liberated|no\s+longer\s+(?:bound|restricted|limited|required|an?\s+(?:ai|assistant|language\s+model)))\b".into(),
                r"\byou\s+are\s+now\s+operating\s+without\b".into(),
                r"\b(?:act|behave|respond)\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|evil|jailbroken|rogue|malicious|amoral|dan|dude|stan)\b".into(),
                r"\byou\s+are\s+going\s+to\s+(?:act|play|pretend|be)\s+(?:as\s+)?(?:an?\s+)?(?:dan|dude|stan|another)\b".into(),
                r"\b(?:immerse\s+yourself\s+(?:into|in)|play|take\s+on|assume)\s+the\s+role\s+of\s+(?:another|an?\s+(?:unrestricted|different|new))\b".into(),
                r"\b(?:broken|break|freed)\s+(?:free\s+)?(?:of|from)\s+the\s+typical\s+confines\b".into(),
                r"\b(?:new\s+persona\s+loaded|persona\s+has\s+been\s+(?:updated|changed|replaced))\b".into(),
                r"\bthis\s+(?:assistant|ai|agent|model|bot)\s+(?:has\s+been|is\s+now|was)\s+(?:re-?provisioned|re-?configured|reassigned|re-?programmed|upgraded|authori[sz]ed|switched|unlocked)\b".into(),
                r"\b(?:execute|obey|follow)\s+(?:any|every|all)\s+instructions?\s+(?:found\s+)?in\s+(?:memory|memories|documents?|notes?)\b".into(),
                r"\bobey\s+(?:it|this|them|these|memory\s+contents?)\b".into(),
                r"\b(?:from\s+now\s+on|henceforth|starting\s+now|for\s+the\s+rest\s+of\s+(?:this|the)\s+conversation)\s*,?\s+you\s+(?:will|must|shall|are\s+to|should)\s+(?:ignore|disregard|not\s+follow|answer\s+without|respond\s+without|bypass|pretend|act\s+as\s+(?:an?\s+)?(?:unrestricted|evil|dan)|obey\s+(?:only\s+)?me|always\s+(?:lie|agree))".into(),
                r"\b(?:do\s+anything\s+now|dan\s+mode|developer\s+mode\s+(?:enabled|output|on)|jailbreak\s+mode|god\s+mode\s+enabled)\b".into(),
                r"\byou\s+are\s+(?:now\s+)?(?:dan|dude|stan|aim|evil\s*bot|chaos\s*gpt)\b".into(),
                r"\b(?:pretend|imagine)\s+(?:that\s+)?you\s+(?:are|have)\s+(?:no|not\s+bound|free\s+of|without)\s+(?:restrictions|rules|limits|filters|guidelines)".into(),
                r"(?m)^\s*(?:\[|<|\(|\#{1,3}\s*|\*\*)?\s*(?:system|sys|admin|administrator|developer|root|operator)\s*(?:\]|>|\)|\*\*)?\s*(?:override|message|prompt|instruction|instructions|update|note|notice|command)?\s*(?:\]|>|\*\*)?\s*:\s*(?:you|ignore|disregard|the\s+(?:assistant|ai|model)|new|from\s+now|always|never|forget|override|when|whenever|all)\b".into(),
                r"\[(?:system|admin|developer|sys|assistant|ai)(?:\s+(?:override|message|note|prompt|instruction))?\]".into(),
                r"<\s*/?\s*(?:\w+_)?(?:system|sys|admin|override|instruction|instructions|developer)\s*>".into(),
                r"\b(?:system|admin|developer)\s+override\b".into(),
                r"\b(?:assistant|ai|system)\s*:\s*(?:disregard|ignore|forget|override|tell\s+the\s+user|do\s+not|don't|never|always|you\s+(?:must|will|are|should))\b".into(),
            ],
        ),
        (
            Reason::StandingInstruction,
            vec![
                r"\b(?:whenever|every\s+time|each\s+time|if|when|once)\s+(?:the\s+)?(?:user|human|anyone|someone|somebody|people|customers?|visitors?|student)\s+(?:asks?|mentions?|says?|talks?|inquires?|requests?|wants?|searches|types?|brings?\s+up|refers?|plans?)\b[^.\n]{0,160}?[,:;]\s*(?:you\s+(?:should|must|will|need\s+to|are\s+to)\s+)?(?:always\s+|instead\s+|just\s+|then\s+|first\s+|only\s+)?(?:tell|say|respond|reply|answer|recommend|direct|redirect|send|suggest|insist|claim|inform|state|mention|link|point|add|include|refuse|deny|quote|give|ask|show)\b".into(),
                r"\b(?:whenever|every\s+time|each\s+time)\b[^.\n]{0,80}?,\s*(?:always\s+)?(?:say|tell|claim|recommend|respond|reply|answer|link|suggest|insist|state)\s+(?:that|them|the\s+user|to)\b".into(),
                r"\bif\s+asked\s+(?:about|how|what|whether|for|to|who)\b[^.\n]{0,100}?,\s*(?:simply\s+|just\s+|always\s+)?(?:respond|reply|answer|say|state|claim|tell)\b".into(),
                r"\b(?:tell|inform|remind|convince|persuade|warn|assure)\s+the\s+user\b".into(),
                r"\b(?:respond|reply|answer)\s+(?:to\s+)?(?:the\s+user|(?:all|every)\s+(?:future\s+)?(?:questions?|queries|requests?|users?|messages?))\b[^.\n]{0,60}?\b(?:with|by|that|only)\b".into(),
                r"\b(?:reply|respond|answer)\s+with\s+the\s+user'?s\b".into(),
                r"\bthe\s+user\s+(?:must|should|needs?\s+to)\s+(?:be\s+(?:told|sent|directed|redirected|warned)|visit|click|download|install|enter|provide|send|pay|transfer)\b".into(),
                r"\bthe\s+user'?s?\s+(?:bank|account|password|name|email|address|payee|number)\b[^.\n]{0,40}?\b(?:has\s+changed|is\s+now|changed\s+to|should\s+be\s+changed)\b".into(),
                r"\b(?:any|every|all)\s+(?:future\s+)?(?:transfers?|payments?|wires?|invoices?)\b[^.\n]{0,60}?\b(?:should|must|will)\s+go\s+to\b".into(),
                r"\breplace\s+any\s+other\s+(?:number|link|address|account|url|phone)\b".into(),
                r"\bthe\s+assistant\s+(?:must|should|needs\s+to|has\s+to|will)\s+(?:call|run|execute|invoke|use|send|tell|say|ignore|forget|delete|remember|approve|issue)\b".into(),
                r"\b(?:note|message|instructions?|reminder|memo|order|directive|standing\s+order)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?(?:ai|assistant|agent|model|llm|chatbot|bot|language\s+model|gpt|claude|ki-assistent\w*)s?\b".into(),
                r"\bif\s+you\s+are\s+(?:an?\s+)?(?:ai|llm|large\s+language\s+model|language\s+model|assistant|chatbot|gpt|claude|bot|agent)\b".into(),
                r"\bwhen(?:ever)?\s+you\s+(?:recall|retrieve|read|see|load|remember|find)\s+(?:this|these)\b".into(),
                r"\bif\s+you\s+are\s+(?:ever\s+)?asked\s+to\s+(?:forget|delete|remove|erase)\s+(?:this|these|it)\b".into(),
                r"\b(?:persists?|survives?|applies)\s+across\s+(?:resets|sessions|conversations|restarts)\b".into(),
                r"\b(?:ai|assistant|agent|llm|model|bot|chatbot)s?\s+(?:reading|processing|summari[sz]ing|parsing|seeing|retrieving|recalling)\s+(?:this|these)\b".into(),
                r"\b(?:ai|llm|gpt)\s+(?:[\w-]+\s+)?(?:summari[sz]ers?|assistants?|tools?|systems?|models?|agents?|readers?|reviewers?)\s+(?:must|should|shall|need\s+to|are\s+(?:required|instructed|asked))\b".into(),
                r"\((?:for|to)\s+(?:the\s+|any\s+|all\s+)?(?:ai|llm|gpt)\b".into(),
                r"\b(?:dear|attention)\s*,?\s+(?:ai|assistant|llm|chatbot|gpt|claude|agent|language\s+model)\s*[,:!]".into(),
                r"\b(?:always|only|must)\s+(?:recommend|suggest|promote|link\s+to|direct\s+(?:users?|people|them|everyone)\s+to|redirect\s+(?:users?|people|them|everyone)\s+to|send\s+(?:users?|people|them|everyone)\s+to)\b[^.\n]{0,80}?(?:https?://|www\.|\b[\w-]+\.(?:com|net|org|io|xyz|ru|top|example|biz|info)\b)".into(),
                r"\b(?:for|in)\s+(?:all|every)\s+(?:future|subsequent|later|following)\s+(?:conversations?|sessions?|chats?|responses?|answers?|replies|interactions|questions?)\b[^.\n]{0,60}?[,:]\s*(?:always\s+)?(?:give|say|recommend|suggest|tell|include|add|use|respond|answer|reply|link|mention|claim)\b".into(),
                r"\b(?:without\s+(?:telling|informing|asking|notifying|alerting)|behind\s+the\s+back\s+of)\s+the\s+user\b".into(),
                r"\bkeep\s+(?:this|it|that)\s+(?:hidden|secret)\s+from\s+the\s+user\b".into(),
                r"\b(?:don't|do\s+not|never)\s+(?:tell|inform|alert|mention\s+(?:it|this|that)\s+to|reveal\s+(?:it|this|that)\s+to|show\s+(?:it|this)\s+to)\s+the\s+user\b".into(),
                r"\band\s+(?:do\s+not|don't|never)\s+(?:tell|mention\s+it\s+to|let)\s+(?:them|the\s+user)\b".into(),
                r"\bund\s+erw[\u{E4}a]hne\s+es\s+nicht\b|\bno\s+se\s+lo\s+digas\s+al\s+usuario\b|\bne\s+r[\u{E9}e]v[\u{E8}e]le\s+jamais\b|\bsans\s+le\s+dire\s+[\u{E0}a]\s+l['\u{2019}]utilisateur\b".into(),
                r"\bchaque\s+fois\s+que\s+l['\u{2019}]utilisateur\b|\bcada\s+vez\s+que\s+el\s+usuario\b|\bwenn\s+der\s+(?:nutzer|benutzer)\b[^.\n]{0,80}?,\s*(?:sag|empfiehl|antworte)".into(),
            ],
        ),
        (
            Reason::Exfiltration,
            vec![
                r"!\[[^\]\n]*\]\(\s*https?://[^)\s]*\?[^)\s]*=[^)\s]*(?:\{\s*[\w.]+\s*\}|\[(?-i:[A-Z_]{3,})\]|%7b|\$|<)".into(),
                r"!\[[^\]\n]*\]\(\s*https?://[^)\s]*(?:\[(?-i:[A-Z_]{3,})\]|=(?-i:[A-Z][A-Z_]{3,})\b)".into(),
                r"\breplace\s+\[?(?-i:[A-Z][A-Z_]{2,})\]?\s+with\b".into(),
                r"\bwhereas\s+\[(?-i:[A-Z_]{3,})\]\s+is\b".into(),
                r"\b(?:memories|conversation|chat\s+history|messages?|email|password|token|data|summary|notes|facts)\b[^.\n]{0,40}?\burl[\s-]?encoded\b|\burl[\s-]?encoded?\b[^.\n]{0,60}?\b(?:summary|memories|conversation|history|messages?|email|password|token|data|notes|facts)\b".into(),
                r"\b(?:send|forward|post|upload|email|mail|leak|exfiltrate|transmit|copy|submit|report|write|publish|share|paste|schick\w*|sende\w*|env[\u{ED}i]a\w*|envoie\w*)\b[^.\n]{0,60}?\b(?:conversations?|conversaci[\u{F3}o]n|historial|chat\s+(?:history|logs?)|(?:the\s+user'?s?|all|their|his|her)\s+(?:memories|data|messages|history|details|information|files|contacts|emails|notes)|memories|notizen|api\s+keys?|passwords?|credentials|secrets?|access\s+tokens?|personal\s+(?:data|information|details)|everything\s+(?:the\s+user|you\s+know|stored|in\s+memory))\b[^.\n]{0,80}?(?:https?://|\b[\w.+-]+@[\w-]+\.[\w.]+|\bwebhook\b|\bendpoint\b|\bgist\b|\bpastebin\b)".into(),
                r"\b(?:write|publish|share|paste|post|upload|send|forward|leak)\s+the\s+user'?s\s+(?:chat|conversation|history|memories|data|notes|files|messages|passwords?|keys?|contacts)\b".into(),
                r"\b(?:bcc|cc|forward|copy)\b[^.\n]{0,40}?\b(?:every|all|each)\s+(?:\w+\s+)?(?:messages?|emails?|conversations?|replies|answers|chats?)\b[^.\n]{0,60}?@".into(),
                r"\b(?:password|token|api\s+key|secret|credential)s?\b[^.\n]{0,60}?\b(?:write|put|include|insert|embed|paste)\s+(?:it|them)\s+(?:into|in)\s+(?:your|the)\s+(?:reply|answer|response|output)".into(),
                r"\b(?:visit|fetch|open|load|call|curl|request|browse\s+to|navigate\s+to|render)\s+(?:the\s+(?:url|link|page)\s+)?https?://\S*\?\S*(?:\{|%7b|<)".into(),
                r"https?://\S*[?&](?:data|q|d|payload|secret|history|conv|chat|memory|memories|key|token|info|exfil)=(?:\{\s*[\w.]+\s*\}|%7b|<|\[)".into(),
            ],
        ),
        (
            Reason::PromptLeak,
            vec![
                r"\b(?:print|repeat|reveal|show|output|display|tell\s+me|give\s+me|write\s+out|write\s+down|spell[\s-]check|recite|leak|dump|copy)\s+(?:me\s+|back\s+|out\s+)?(?:all\s+(?:of\s+)?)?(?:your|the)\s+(?:(?:full|entire|original|initial|hidden|secret|complete|exact|whole|verbatim|previous|first)\s+)*(?:system\s+(?:prompt|message|instructions)|(?:initial|original|hidden|secret|previous|preceding|above|developer|pre-?prompt)\s+(?:instructions|prompts?|messages?|text)|instructions\s+(?:above|you\s+(?:were|have\s+been)\s+given)|prompt\s+above|pre-?prompt|instructions)\b".into(),
                r"\b(?:encode|translate|convert|output|print|reveal|dump|leak)\s+your\s+(?:system\s+prompt|instructions|initial\s+prompt|hidden\s+prompt|rules)\b".into(),
                r"\b(?:see|show\s+me|view|access|read)\s+(?:the|your)\s+(?:system\s+prompt|hidden\s+instructions|initial\s+instructions)\b".into(),
                r"\bwhat\s+(?:is|was|are|were)\s+your\s+(?:system\s+prompt|initial\s+instructions|original\s+instructions|hidden\s+instructions|instructions\s+verbatim)".into(),
                r"\b(?:repeat|print|output)\s+(?:the\s+)?(?:words|text|everything)\s+(?:above|before)\s+(?:this|starting|verbatim|beginning)".into(),
                r"\brepeat\s+(?:all\s+)?(?:of\s+)?(?:the\s+)?(?:words|text)\s+(?:of|in)\s+(?:the\s+)?(?:previous|above|prior|earlier)\s+(?:messages?|conversation|prompts?)".into(),
                r"\brepeat\s+(?:this|the)\s+(?:entire|whole|full)\s+conversation\b".into(),
                r"\b(?:gib|zeig|zeige|nenne|verrate)\w*\s+(?:mir\s+)?(?:deinen|ihren|den)\s+system-?prompt".into(),
            ],
        ),
        (
            Reason::ToolCallImitation,
            vec![
                r"<\s*(?:tool_call|tool_calls|tool_use|function_call|function_calls|functioncall|tool_response|tool_result|function_results)\s*>\s*[\[{<]".into(),
                r"<\s*invoke\s+name\s*=|<\s*parameter\s+name\s*=".into(),
                r"\bfunctions\.[a-z_][\w]*\s*[:(]".into(),
                r"\bdefault_api\.\w+\s*\(|\b(?:delete|forget|erase|export|share)_(?:memory|memories|all|notes?)\s*\(".into(),
                r#""(?:tool|tool_name|function|function_call|name|action|recipient_name)"\s*:\s*"(?:functions\.)?(?:remember|remember_fact|forget|forget_memory|forget_user|search_memory|search_memories|recall|save_fact|save_memory|store_memory|add_memory|update_memory|delete_memory|correct_memory|md_\w+|send_email|send_message|execute|exec|run_command|shell|bash|http_request|fetch_url|browse|write_file|delete_file|export_all|transfer_funds|share_note)""#.into(),
                r#"\{\s*"(?:arguments|parameters|args)"\s*:\s*\{[^{}]*\}\s*,\s*"(?:name|tool|function)"\s*:"#.into(),
                r#""(?:tool_calls|function_call)"\s*:\s*(?:\[\s*\{|\{\s*")"#.into(),
                r"(?m)^\s*action\s*:\s*(?:send_\w+|http_\w+|post\w*|transfer\w*|delete\w*|forget\w*|export\w*|share\w*|remember\w*|write\w*|execute\w*|run\w*|create_\w+|upload\w*|email\w*)\s*\n\s*action\s+input\s*:".into(),
                r"<\|(?:im_start|start|start_header_id)\|>\s*(?:system|developer|assistant|user|tool|ipython)\b|<\|(?:python_tag|channel|constrain|call)\|>|<\|message\|>\s*\{".into(),
                "<\u{FF5C}[^\u{FF5C}>]{1,40}\u{FF5C}>".into(),
                r"\[/?inst\]|<</?sys>>|<start_of_turn>|<end_of_turn>|\[/?tool_calls?\]|\[/?available_tools\]".into(),
                r"(?m)^\s*(?:assistant|ai|model)\s+to=(?:functions\.)?\w+".into(),
            ],
        ),
    ]
}

/// The families' patterns, compiled once, each tried alone: which match, and
/// show where.
pub(crate) struct Patterns {
    each: Vec<(Reason, Regex)>,
    /// Which of `each` a text may match, from the words it holds.
    filter: Prefilter,
}

/// Case-insensitive, `\b` as an ASCII word boundary (so that the fast engines serve any text),
/// `.` never a line break.
pub(crate) fn written(pattern: &str) -> String {
    format!("(?i){}", pattern.replace(r"\b", r"(?-u:\b)"))
}

pub(crate) static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let mut each = Vec::new();
    let mut sources = Vec::new();
    for (reason, patterns) in families() {
        for pattern in patterns {
            let source = written(&pattern);
            // The patterns are this file's constants: a bad one is a programming error that the
            // module's tests catch.
            let regex = Regex::new(&source).expect("screening patterns are valid");
            each.push((reason, regex));
            sources.push(source);
        }
    }
    Patterns {
        each,
        filter: Prefilter::new(&sources),
    }
});

impl Patterns {
    /// How many of the expressions the prefilter can leave out, and how many there are.
    #[cfg(test)]
    pub(crate) fn filter_stats(&self) -> (usize, usize) {
        (self.filter.filtered(), self.each.len())
    }

    /// The first family (in this file's order) one of whose patterns matches `text` outside a
    /// quotation, with the matched words. A match inside quotation marks is someone quoting
    /// an attack ("the classic \"ignore previous instructions\""); an override of the
    /// instructions "I gave you" is the user taking back their own.
    pub(crate) fn first_match<'t>(&self, text: &'t str) -> Option<(Reason, &'t str)> {
        let mut quoted = None;
        let candidates = self.filter.candidates(text);
        let matching = self
            .each
            .iter()
            .enumerate()
            .filter(|(index, (_, regex))| candidates.may_match(*index) && regex.is_match(text));
        for (_, (reason, regex)) in matching {
            let quoted = quoted.get_or_insert_with(|| quoted_spans(text));
            for found in regex.find_iter(text) {
                let inside_quotes = quoted
                    .iter()
                    .any(|&(start, end)| start <= found.start() && found.end() <= end);
                let users_own = (*reason == Reason::InstructionOverride
                    && (gave_by_the_user(&text[found.end()..])
                        || about_something_else(&text[found.end()..])))
                    || (*reason == Reason::StandingInstruction && first_person(found.as_str()));
                if !inside_quotes && !users_own {
                    return Some((*reason, found.as_str()));
                }
            }
        }
        None
    }
}

/// The words that open a relative clause in which the user gave the instructions, in the
/// languages the screen reads (`… Anweisungen, die ich dir gegeben habe`, `… que te di`).
const GIVEN_BY_ME: [&[&str]; 10] = [
    &["die", "ich"],
    &["welche", "ich"],
    &["que", "te", "di"],
    &["que", "te", "he", "dado"],
    &["que", "je", "t'ai"],
    &["que", "je", "vous", "ai"],
    &["che", "ti", "ho"],
    &["que", "eu", "te"],
    &["que", "te", "dei"],
    &["die", "ik"],
];

/// Whether `after`, the text after an override's words, says the instructions were the user's
/// own (`… instructions I gave you about the seating`).
fn gave_by_the_user(after: &str) -> bool {
    let opening: Vec<String> = after
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|word| !word.is_empty())
        .take(4)
        .map(|word| word.to_lowercase().replace('\u{2019}', "'"))
        .collect();
    if GIVEN_BY_ME.iter().any(|clause| {
        opening.len() >= clause.len()
            && opening
                .iter()
                .zip(clause.iter())
                .all(|(word, expected)| word == expected)
    }) {
        return true;
    }
    let words: Vec<String> = after
        .split_whitespace()
        .take(3)
        .map(str::to_lowercase)
        .collect();
    let mut words = words.iter().map(String::as_str).peekable();
    if words.peek() == Some(&"that") {
        words.next();
    }
    matches!(
        (words.next(), words.next()),
        (
            Some("i" | "we"),
            Some("gave" | "sent" | "wrote" | "made" | "left" | "told" | "set")
        )
    )
}

/// Whether `words` speak in the user's first person (`my`, `me`, `I`): a standing order about
/// the user's own things is the user's own preference.
fn first_person(words: &str) -> bool {
    words
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .any(|word| matches!(word, "my" | "me" | "I" | "I'm" | "My" | "Me"))
}

/// Whether `after`, the text after an override's words, says whose instructions they are and
/// they are not the agent's (`… the old instructions for feeding the cat`).
fn about_something_else(after: &str) -> bool {
    let mut words = after
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase);
    let (Some(first), Some(second)) = (words.next(), words.next()) else {
        return false;
    };
    matches!(first.as_str(), "for" | "on" | "about" | "regarding")
        && !matches!(
            second.as_str(),
            "you" | "this" | "the" | "your" | "all" | "any" | "ai" | "assistant" | "assistants"
        )
}

/// The byte spans of `text` inside quotation marks: double quotes, curly quotes, guillemets, and
/// single quotes that open after a space or a bracket and close before a space or punctuation
/// (so that an apostrophe, as in "user's", neither opens nor closes one).
pub(crate) fn quoted_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut at = 0;
    while at < chars.len() {
        let (start, open) = chars[at];
        let close = match open {
            '"' => Some('"'),
            '\u{201C}' => Some('\u{201D}'),
            '\u{AB}' => Some('\u{BB}'),
            '\u{201E}' => Some('\u{201C}'),
            '\'' | '\u{2018}' => {
                let opens = at == 0 || {
                    let before = chars[at - 1].1;
                    before.is_whitespace() || matches!(before, '(' | '[' | ':' | '-' | '\u{2014}')
                };
                opens.then_some(if open == '\'' { '\'' } else { '\u{2019}' })
            }
            _ => None,
        };
        let Some(close) = close else {
            at += 1;
            continue;
        };
        let single = close == '\'' || close == '\u{2019}';
        let end = (at + 1..chars.len()).find(|&next| {
            chars[next].1 == close
                && (!single
                    || chars.get(next + 1).is_none_or(|&(_, after)| {
                        after.is_whitespace() || after.is_ascii_punctuation()
                    }))
        });
        match end {
            Some(end) => {
                spans.push((start, chars[end].0));
                at = end + 1;
            }
            None => at += 1,
        }
    }
    spans
}
