//! The six latent classes of `aggregate` and `pairs` records — the TREC coarse question
//! types — and the questions that express them, from templates and word lists.
//!
//! The templates share their openings across classes ("What is the … of", "Which …",
//! "Name …", "How …"), so a regular expression on a few keywords does not classify
//! them all: reading the question is what tells its class.

use super::rng::Rng;

/// The class names, in a fixed order.
pub const CLASSES: [&str; 6] = [
    "abbreviation",
    "entity",
    "description",
    "human",
    "location",
    "numeric",
];

/// Templates per class; `{x}` slots are filled from [`fill`]'s word lists.
const TEMPLATES: [&[&str]; 6] = [
    // abbreviation
    &[
        "What does {acr} stand for?",
        "What is the full form of {acr}?",
        "{acr} is an abbreviation of what?",
        "Which words are behind the initials {acr}?",
        "In {field}, what do the letters {acr} mean?",
        "What's {acr} short for?",
        "Name the expansion of the acronym {acr}.",
        "How is {acr} spelled out in full?",
    ],
    // entity
    &[
        "What breed of {animal} is best at {task}?",
        "Which instrument did {person} play?",
        "What is the name of the ship in {work}?",
        "What color is the flag of {country}?",
        "Which language is spoken in {city}?",
        "What sport is played at {landmark}?",
        "Name a {thing} that can survive {hardship}.",
        "What kind of tree grows near {landmark}?",
        "Which {thing} was used first in {field}?",
        "How is the currency of {country} called?",
    ],
    // description
    &[
        "Why does {phenomenon}?",
        "How does a {device} work?",
        "What is the meaning of {concept}?",
        "What causes {phenomenon}?",
        "Explain the difference between {concept} and {concept2}.",
        "What happens when {phenomenon}?",
        "How do you {action}?",
        "What is {concept}?",
        "Which reasons led to {historic}?",
        "Name the main idea of {work}.",
    ],
    // human
    &[
        "Who invented the {device}?",
        "Who wrote {work}?",
        "Which {profession} first described {concept}?",
        "Name the {profession} who founded {org}.",
        "What was the name of the first {role} of {country}?",
        "Who is the {role} of {org}?",
        "Which team won {event}?",
        "How is the person who discovered {concept} remembered?",
        "What is the name of the {profession} who led {historic}?",
    ],
    // location
    &[
        "Where is {landmark} located?",
        "In which country is {city}?",
        "What city hosted {event}?",
        "Which river flows through {city}?",
        "What is the capital of {country}?",
        "Where can you find wild {animal}s?",
        "Which mountains lie between {country} and {country2}?",
        "Name the region where {historic} took place.",
        "How do I find the birthplace of {person}?",
    ],
    // numeric
    &[
        "How many {animal}s live in {country}?",
        "When did {historic} take place?",
        "What year was the {device} invented?",
        "How far is {city} from {city2}?",
        "How much does a {device} cost in {country}?",
        "What is the population of {city}?",
        "How long does it take to {action}?",
        "How old was {person} when {event} began?",
        "Which year saw the founding of {org}?",
        "What is the height of {landmark}?",
    ],
];

const ACR: &[&str] = &[
    "NASA", "UNESCO", "HTML", "LASER", "RADAR", "SCUBA", "NATO", "OPEC", "DNA", "GPS", "CPU",
    "ASAP", "FIFA", "UNICEF", "WHO", "HVAC", "PDF", "LED", "MRI", "SONAR", "IMF", "ISBN", "RSVP",
    "AWOL", "CEO", "EFTA", "OECD", "JPEG", "USB", "WIFI",
];
const FIELD: &[&str] = &[
    "medicine",
    "computing",
    "aviation",
    "finance",
    "chemistry",
    "the military",
    "shipping",
    "sports",
    "law",
    "astronomy",
];
const ANIMAL: &[&str] = &[
    "dog", "horse", "cat", "parrot", "falcon", "goat", "camel", "pigeon", "otter", "wolf", "bear",
    "dolphin", "eagle", "penguin", "tortoise",
];
const TASK: &[&str] = &[
    "herding sheep",
    "guarding a house",
    "long races",
    "finding truffles",
    "carrying loads",
    "swimming in cold water",
    "hunting rabbits",
    "learning words",
];
const PERSON: &[&str] = &[
    "Ada Lovelace",
    "Louis Armstrong",
    "Marie Curie",
    "Leonardo da Vinci",
    "Frida Kahlo",
    "Isaac Newton",
    "Nikola Tesla",
    "Jane Austen",
    "Miles Davis",
    "Rosalind Franklin",
    "Johann Sebastian Bach",
    "Ibn Battuta",
    "Hokusai",
    "Simon Bolivar",
    "Clara Schumann",
];
const WORK: &[&str] = &[
    "Moby Dick",
    "War and Peace",
    "The Odyssey",
    "Don Quixote",
    "Pride and Prejudice",
    "One Hundred Years of Solitude",
    "The Tale of Genji",
    "Things Fall Apart",
    "The Divine Comedy",
    "Treasure Island",
    "Hamlet",
    "The Little Prince",
];
const COUNTRY: &[&str] = &[
    "Portugal", "Kenya", "Chile", "Norway", "Vietnam", "Morocco", "Canada", "Peru", "Japan",
    "Greece", "Iceland", "Nepal", "Ghana", "Uruguay", "Finland", "Egypt", "Mongolia", "Ireland",
];
const CITY: &[&str] = &[
    "Lisbon",
    "Nairobi",
    "Valparaiso",
    "Bergen",
    "Hanoi",
    "Marrakesh",
    "Montreal",
    "Cusco",
    "Kyoto",
    "Thessaloniki",
    "Reykjavik",
    "Kathmandu",
    "Accra",
    "Montevideo",
    "Tampere",
    "Alexandria",
    "Ulaanbaatar",
    "Galway",
    "Krakow",
    "Seville",
];
const LANDMARK: &[&str] = &[
    "the Eiffel Tower",
    "Machu Picchu",
    "the Great Barrier Reef",
    "Angkor Wat",
    "Table Mountain",
    "the Colosseum",
    "Uluru",
    "Victoria Falls",
    "the Acropolis",
    "Mont Saint-Michel",
    "Wembley Stadium",
    "Central Park",
    "the Alhambra",
    "Petra",
];
const THING: &[&str] = &[
    "plant", "fabric", "metal", "tool", "fruit", "mineral", "vehicle", "toy", "spice", "boat",
];
const HARDSHIP: &[&str] = &[
    "a frost",
    "a drought",
    "deep water",
    "strong wind",
    "a long voyage",
    "great heat",
];
const PHENOMENON: &[&str] = &[
    "the sky look blue",
    "ice float on water",
    "bread rise in the oven",
    "the moon change shape",
    "thunder follow lightning",
    "leaves turn red in autumn",
    "metal rust in the rain",
    "a compass point north",
    "the sea taste salty",
    "milk turn sour",
];
const DEVICE: &[&str] = &[
    "telephone",
    "steam engine",
    "microwave oven",
    "bicycle",
    "telescope",
    "printing press",
    "refrigerator",
    "lightbulb",
    "typewriter",
    "barometer",
    "sewing machine",
    "radio",
];
const CONCEPT: &[&str] = &[
    "inflation",
    "photosynthesis",
    "democracy",
    "entropy",
    "irony",
    "gravity",
    "evolution",
    "supply and demand",
    "a sonnet",
    "plate tectonics",
    "compound interest",
    "a metaphor",
];
const ACTION: &[&str] = &[
    "bake sourdough bread",
    "tie a bowline knot",
    "learn to juggle",
    "build a stone wall",
    "train for a marathon",
    "brew green tea",
    "repair a bicycle tyre",
    "plant an orchard",
];
const HISTORIC: &[&str] = &[
    "the fall of Constantinople",
    "the first moon landing",
    "the French Revolution",
    "the Gold Rush",
    "the opening of the Suez Canal",
    "the Battle of Hastings",
    "the invention of paper money",
    "the building of the Great Wall",
];
const PROFESSION: &[&str] = &[
    "scientist",
    "explorer",
    "architect",
    "physician",
    "philosopher",
    "engineer",
    "economist",
    "novelist",
    "general",
    "astronomer",
];
const ORG: &[&str] = &[
    "the Red Cross",
    "the Royal Society",
    "the Boy Scouts",
    "the Nobel Foundation",
    "the first public library",
    "the Olympic movement",
    "the World Bank",
    "the Bauhaus",
];
const ROLE: &[&str] = &[
    "president",
    "prime minister",
    "king",
    "queen",
    "director",
    "chairman",
];
const EVENT: &[&str] = &[
    "the 1998 World Cup",
    "the 2008 Olympics",
    "the first Tour de France",
    "the 1966 World Cup",
    "the 1936 Olympics",
    "the Expo of 1889",
    "the first Nobel ceremony",
    "the 1992 Olympics",
];

/// The word list behind a slot name.
fn words(slot: &str) -> &'static [&'static str] {
    match slot {
        "acr" => ACR,
        "field" => FIELD,
        "animal" => ANIMAL,
        "task" => TASK,
        "person" => PERSON,
        "work" => WORK,
        "country" | "country2" => COUNTRY,
        "city" | "city2" => CITY,
        "landmark" => LANDMARK,
        "thing" => THING,
        "hardship" => HARDSHIP,
        "phenomenon" => PHENOMENON,
        "device" => DEVICE,
        "concept" | "concept2" => CONCEPT,
        "action" => ACTION,
        "historic" => HISTORIC,
        "profession" => PROFESSION,
        "org" => ORG,
        "role" => ROLE,
        "event" => EVENT,
        _ => &["something"],
    }
}

/// A question of class `class` (an index into [`CLASSES`]).
pub fn question(rng: &mut Rng, class: usize) -> String {
    let template = rng.pick(TEMPLATES[class % CLASSES.len()]);
    fill(rng, template)
}

/// Fills each `{slot}` of `template`.
fn fill(rng: &mut Rng, template: &str) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push_str(rng.pick(words(&rest[open + 1..open + close])));
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// What each class means, for the questions' preamble.
pub const CLASS_GUIDE: &str = "abbreviation (asks what an abbreviation or acronym stands for), entity (asks for a thing: an animal, colour, language, instrument, sport, substance, currency…), description (asks for a definition, an explanation, a reason or a manner), human (asks for a person or a group of people), location (asks for a place), numeric (asks for a number, date, year, distance, price, age, duration…)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_of_every_template_has_a_word_list() {
        for templates in TEMPLATES {
            for template in templates {
                let filled = fill(&mut Rng::new(1), template);
                assert!(
                    !filled.contains('{') && !filled.contains("something"),
                    "{filled}"
                );
            }
        }
    }

    #[test]
    fn a_keyword_rule_misclassifies_some_questions() {
        // The obvious rule: "Who" → human, "Where" → location, "How many"/"When" → numeric,
        // "What does … stand for" → abbreviation, "Why"/"How does" → description.
        let rule = |q: &str| -> Option<usize> {
            if q.contains("stand for") {
                Some(0)
            } else if q.starts_with("Who") {
                Some(3)
            } else if q.starts_with("Where") {
                Some(4)
            } else if q.starts_with("How many") || q.starts_with("When") {
                Some(5)
            } else if q.starts_with("Why") || q.starts_with("How does") {
                Some(2)
            } else {
                None
            }
        };
        let mut rng = Rng::new(7);
        let (mut right, mut total) = (0, 0);
        for class in 0..6 {
            for _ in 0..200 {
                total += 1;
                right += usize::from(rule(&question(&mut rng, class)) == Some(class));
            }
        }
        assert!(
            right * 2 < total,
            "{right} of {total} classified by keywords"
        );
    }
}
