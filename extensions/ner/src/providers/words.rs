//! Word lists the pattern provider reads: cues before and after names, relation nouns, and the
//! capitalised words that are not names. All lowercase, apostrophes as `'`. Lists are kept as
//! text (words separated by white space, phrases by commas) so that they stay compact.

use std::collections::HashSet;
use std::sync::LazyLock;

/// The words of a white-space-separated list.
fn words(list: &'static str) -> HashSet<&'static str> {
    list.split_whitespace().collect()
}

/// The phrases of a comma-separated list, each as its words.
fn phrases(list: &'static str) -> Vec<Vec<&'static str>> {
    list.split(',')
        .map(|phrase| phrase.split_whitespace().collect::<Vec<_>>())
        .filter(|phrase| !phrase.is_empty())
        .collect()
}

/// Capitalised words that never start or continue a name: pronouns, determiners, days, months,
/// greetings, family words, titles, time words, holidays, languages and nationalities.
pub(crate) static STOP: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         i i'm i'll i've i'd me you you're you'll you've he he's she she's we we're we'll we've
         they they're it it's my our your his her their its the a an this that these those some
         any every each all no none there here monday tuesday wednesday thursday friday saturday
         sunday mon tue tues wed thu thur thurs fri sat sun mondays tuesdays wednesdays thursdays
         fridays saturdays sundays weekday weekend january february march april may june july
         august september october november december jan feb mar apr jun jul aug sep sept oct nov
         dec hi hey hello thanks thank cheers bye goodbye please sorry ok okay yes yeah yep nope
         lol haha wow oh dear welcome congrats congratulations happy merry good great hmm um btw
         fyi omg asap mom mum mommy mummy mama dad daddy papa mother father grandma grandpa
         granny grandmother grandfather nana nan uncle aunt auntie sis bro babe baby honey sir
         madam boss doc doctor cousin team everyone guys folks mr mrs ms miss dr prof professor
         mx st sr jr rev today tomorrow yesterday tonight morning afternoon evening night week
         month year years day days noon midnight am pm next last eve christmas xmas easter
         thanksgiving halloween hanukkah ramadan eid diwali passover valentine's valentines
         english spanish french german italian portuguese chinese mandarin japanese korean
         russian arabic hindi dutch swedish norwegian danish finnish polish greek turkish hebrew
         american british european asian african canadian australian mexican indian brazilian
         irish scottish welsh latin ukrainian vietnamese thai god internet covid tv ai pdf faq
         eta re fwd ps one two three four five six seven eight nine ten eleven twelve twenty
         hundred thousand million first second third chapter section part episode season volume
         phase step level room floor gate terminal platform version sprint q1 q2 q3 q4",
    )
});

/// Common English words: a capitalised one at the start of a sentence is that word, not a name;
/// and two of them joined by "and" are not two people.
pub(crate) static COMMON: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         a about above after again against ago almost along already also although always among
         and another anyone anything anyway around as at away back because before behind below
         besides between both but by can can't cannot could couldn't did didn't do does doesn't
         don't down during either else enough even ever everybody everything except few for from
         had has have having how however if in instead into is isn't just least less let let's
         like maybe might more most much must neither never nobody nor not nothing now of off
         often on once only or other otherwise out over perhaps quite rather really same should
         shouldn't since so somebody someone something sometimes soon still such than then though
         through to too under unless until up upon very was wasn't were what what's whatever when
         where whether which while who whoever why will with within without won't would wouldn't
         yet be been being are aren't am there's here's that's how's where's who's why's ok
         actually apparently basically certainly clearly definitely finally frankly generally
         honestly hopefully ideally literally luckily meanwhile normally obviously personally
         probably quickly seriously similarly sadly speaking surely thankfully unfortunately
         usually well anyways later earlier first second third twice lastly overall sure fine
         cool nice awesome alright right add ask book bring buy call cancel change check come
         continue create delete done draft email find finish fix forget forward get give go going
         got guess help hope invite keep know list listen look make mention message move need
         note order pay pick ping plan post put read remember remind reply run save say schedule
         see send set share show sign sounds start stop summarise summarize take talk tell text
         think thought try turn update use wait want wanted watch write went came made said told
         asked seems looks feel feels felt love loved hate enjoy met meet meeting found tried
         bought finished started moved spent worked working planning thinking reading watching
         trying looking heading leaving getting making taking doing club work job home house
         office lunch dinner breakfast coffee tea party trip travel flight train car bus school
         class project report review deadline budget idea question answer problem issue bug test
         notes task tasks reminder news time times people person thing things stuff place world
         life family friends kids game games movie movies music song series story food water
         weather rain snow sun health money price cost team company group board room door phone
         app website page link file files chat data code version release feature design doc docs
         slides deck apple pie cake bread salt pepper star wars war peace art science history
         nature city country state street road park garden beach river lake sea ocean island
         mountain mountains north south east west left top bottom end part side way case point
         fact level kind type number name word words line lines changes result results step steps
         rule rules pro tip tips summary new old big small little long short high low early late
         young important different large real best better worse worst bad free full hard easy
         fast slow quick hot cold warm dark light black white red blue green yellow brown grey
         gray pink purple orange golden silver open closed final main own public private special
         visual general global local social total whole wrong true false sweet strong weak rich
         poor tired busy ready sick glad excited super funny weird crazy amazing perfect lovely
         beautiful simple fresh clean quiet loud wild lucky brave calm breaking dear dead living
         modern classic common daily weekly monthly annual current recent future past present
         secret fair",
    )
});

/// Products and companies so often written capitalised in chat that a bare capitalised word
/// after "with" or in a pair is more likely them than a person.
pub(crate) static NOT_PEOPLE: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         google microsoft apple amazon facebook meta netflix spotify slack zoom notion github
         gitlab jira confluence figma excel word outlook gmail youtube instagram twitter tiktok
         whatsapp telegram signal discord teams uber lyft airbnb tesla adobe oracle samsung sony
         nintendo xbox playstation iphone ipad android windows linux mac macos ios python rust
         java javascript typescript kubernetes docker postgres chatgpt openai claude gemini
         copilot linkedin reddit wikipedia dropbox trello asana salesforce shopify paypal venmo
         stripe ikea costco walmart starbucks mcdonald's duolingo peloton strava kindle chrome
         firefox safari calendar drive sheets maps lego pokemon siri alexa coursera udemy product
         design finance legal sales marketing engineering support security accounting operations
         ops research management leadership compliance procurement recruiting payroll facilities
         infra it hr admin qa devops growth partnerships",
    )
});

/// Animals people give names to: "a cat named Luna", "my dog is called Pixel".
pub(crate) static NAMED_ANIMALS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         dog dogs puppy pup cat cats kitten kitty pet pets horse pony donkey bird parrot budgie
         canary fish goldfish hamster gerbil rabbit bunny pig turtle tortoise snake lizard gecko
         iguana ferret mouse rat chicken hen rooster goat sheep cow alpaca llama",
    )
});

/// Things people give names to: "our boat Seabird", "my car is called Betsy".
pub(crate) static NAMED_THINGS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         car truck van bike motorbike motorcycle scooter boat yacht ship plane drone robot laptop
         computer phone server plant tree garden company startup business shop store cafe
         restaurant bakery band album song film movie podcast blog channel newsletter novel game
         app project club house cottage cabin farm brand product",
    )
});

/// Words that turn the capitalised words before them into an organisation name.
pub(crate) static ORG_SUFFIXES: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         Inc Ltd LLC GmbH Corp Corporation AG SA PLC plc LLP Limited Incorporated BV Pty SAS SRL
         Srl KG Co",
    )
});

/// Heads of education and research organisations (`X University`, `University of X`).
pub(crate) static ORG_HEADS: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| words("University College Institute Academy Polytechnic School"));

/// First words of multi-word place names (`New York`, `San Diego`).
pub(crate) static PLACE_PREFIXES: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         new san santa los las el saint st port fort mount lake north south east west hong rio
         buenos cape upper lower great costa puerto sri abu kuala tel",
    )
});

/// Last words of place names (`Baker Street`, `Central Park`).
pub(crate) static PLACE_HEADS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         street road avenue boulevard lane drive park square station airport bridge lake river
         mountain mountains beach bay island islands valley hill hills city county province
         district coast",
    )
});

/// Lowercase nouns after a place name in `the <Place> office`.
pub(crate) static PLACE_NOUNS_AFTER: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         office offices branch campus airport headquarters hq area store site",
    )
});

/// Relation nouns in `my <relation> <Name>`.
pub(crate) static RELATIONS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         wife husband partner spouse boyfriend girlfriend fiancé fiancée fiance fiancee ex
         ex-wife ex-husband ex-boyfriend ex-girlfriend son daughter kid child baby stepson
         stepdaughter brother sister sibling twin stepbrother stepsister half-brother half-sister
         mom mum mother dad father stepmom stepmum stepmother stepdad stepfather parent grandma
         grandmother grandpa grandfather granny grandson granddaughter grandchild uncle aunt
         auntie cousin niece nephew mother-in-law father-in-law sister-in-law brother-in-law
         son-in-law daughter-in-law friend bestie buddy pal roommate flatmate housemate neighbour
         neighbor boss manager supervisor colleague coworker co-worker teammate lead mentor
         mentee intern assistant client customer landlord landlady tenant therapist doctor
         dentist physio physiotherapist trainer coach teacher tutor professor lawyer accountant
         vet nanny babysitter classmate cofounder co-founder report hairdresser barber pastor
         date",
    )
});

/// Words between the possessive and the relation noun (`my older sister`, `my best friend`).
pub(crate) static RELATION_ADJECTIVES: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         best older younger little big baby new old oldest youngest eldest elder twin late former
         dear close favourite favorite future direct good childhood work school college",
    )
});

/// Capitalised family words used as a title before a name (`Uncle Bob`).
pub(crate) static FAMILY_TITLES: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         uncle aunt auntie grandma grandpa granny cousin nana",
    )
});

/// Titles before a surname (`Dr. Patel`); not part of the name.
pub(crate) static TITLES: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         mr mrs ms miss dr prof professor mx sir dame",
    )
});

/// Abbreviations whose full stop does not end a sentence.
pub(crate) static ABBREVIATIONS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         mr mrs ms dr prof st sr jr vs etc e.g i.e approx no mt ft jan feb mar apr jun jul aug
         sep sept oct nov dec",
    )
});

/// Greetings before a name (`Hi Mark`, `Thanks, Anna`).
pub(crate) static GREETINGS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         hi hey hello thanks cheers dear bye goodbye morning night congrats congratulations yo
         howdy hiya welcome",
    )
});

/// Phrases right before a person's name (`met with Priya`, `told Sam`).
pub(crate) static PERSON_CUES: LazyLock<Vec<Vec<&'static str>>> = LazyLock::new(|| {
    phrases(
        "\
         with, told, tell, telling, ask, asked, asking, call, called, calling, text, texted,
         texting, ping, pinged, message, messaged, emailed, met, meet, meeting, thank, thanked,
         invite, invited, inviting, married, marry, marrying, dating, hug, hugged, remind,
         reminded, congratulate, talked to, talk to, talking to, spoke to, speak to, speaking to,
         spoke with, speak with, chatted to, introduced me to, heard from, got a message from,
         got a text from, call from, text from, email from, message from, pay, paid, owe, owes,
         lent, borrowed from",
    )
});

/// Verbs right after a person's name (`Olivia said`).
pub(crate) static SAID_VERBS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         said says told tells asked asks thinks thought mentioned mentions wants wanted texted
         emailed messaged replied suggested suggests recommended recommends promised explained
         agreed insists insisted reckons complained admitted confirmed announced claims claimed",
    )
});

/// Nouns after a person's possessive (`Hannah's place`, `Nina's birthday`).
pub(crate) static PERSONAL_NOUNS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    words(
        "\
         birthday wedding party place house home flat apartment room mom mum dad mother father
         wife husband partner boyfriend girlfriend son daughter kids children baby sister brother
         parents family dog cat car phone number idea advice recipe friend friends boss
         graduation funeral surgery retirement anniversary farewell shower email address opinion
         leaving promotion",
    )
});

/// Phrases right before a place (`moved to Lisbon`, `I live in Berlin`, `I'm from Porto`).
pub(crate) static LOCATION_CUES: LazyLock<Vec<Vec<&'static str>>> = LazyLock::new(|| {
    phrases(
        "\
         moved to, move to, moving to, relocated to, relocating to, flew to, fly to, flying to,
         flight to, flights to, went to, going to, drove to, drive to, driving to, trip to,
         travel to, traveled to, travelled to, traveling to, travelling to, headed to,
         heading to, train to, ticket to, tickets to, visit to, holiday to, vacation to, way to,
         live in, lives in, living in, lived in, based in, born in, grew up in, raised in,
         stay in, staying in, stayed in, stays in, i'm in, i am in, we're in, we are in, be in,
         been in, was in, were in, arrived in, landed in, settled in, conference in, office in,
         offices in, weekend in, week in, weeks in, days in, holiday in, holidays in,
         vacation in, honeymoon in, wedding in, job in, apartment in, flat in, house in,
         hotel in, startup in, summer in, winter in, spring in, autumn in, night in, nights in,
         meetup in, workshop in, university in, school in, restaurant in, cafe in, café in,
         friends in, family in, parents in, hospital in, back in, here in, somewhere in,
         study in, studying in, studied in, i'm from, i am from, am from, is from, are from,
         was from, originally from, come from, comes from, came from, visiting from, moved from,
         back from, in from, returned from, arrived from, flew back from",
    )
});

/// Phrases right before an organisation (`works at Google`, `graduated from MIT`).
pub(crate) static ORG_CUES: LazyLock<Vec<Vec<&'static str>>> = LazyLock::new(|| {
    phrases(
        "\
         work at, works at, working at, worked at, work for, works for, working for, worked for,
         job at, intern at, interning at, internship at, interview at, interviewed at,
         employed by, hired by, studies at, study at, studying at, studied at, graduated from,
         graduate of, student at, professor at, engineer at, manager at, developer at,
         designer at, ceo of, cto of, founder of, co-founder of, cofounder of, offer from,
         offer at, position at, role at, team at, applying to, applied to, accepted to,
         accepted at, admitted to",
    )
});
