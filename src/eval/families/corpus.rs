//! `corpus` (BrowseComp-Plus-like): many documents, a question whose answer joins a fact
//! of one document with a fact of another ("In which town was the founder of X
//! born?"), among distractor documents of the same two shapes. The context is a corpus:
//! JSONL records `{"docid", "title", "text"}`, one document a line. Exact match on the
//! town.

use std::collections::HashSet;

use super::{Generated, TaskFamily};
use crate::eval::prose::paragraph;
use crate::eval::rng::Rng;
use crate::eval::score::Scorer;
use crate::tokens;

const SYLLABLES: &[&str] = &[
    "bar", "cel", "dor", "fen", "gal", "hol", "ix", "jun", "kel", "lum", "mar", "nov", "or",
    "pel", "quin", "ros", "sil", "tor", "ul", "ven", "wyn", "yar", "zel", "ant", "bri", "cor",
];
const COMPANY_KINDS: &[&str] = &[
    "Labs", "Works", "Systems", "Foundry", "Analytics", "Robotics", "Textiles", "Logistics",
];
const FIRST_NAMES: &[&str] = &[
    "Mara", "Tobias", "Ilse", "Ruben", "Noor", "Casimir", "Edda", "Felix", "Greta", "Hugo",
    "Ines", "Jonas", "Katja", "Lionel", "Mirela", "Nils", "Odile", "Pavel", "Rosa", "Stellan",
];
const TOWNS: &[&str] = &[
    "Eldham", "Brackwater", "Corrin Vale", "Dunmore", "Eastwick", "Fallowmere", "Glenhaven",
    "Harrowgate", "Ivybridge", "Kestrel Point", "Larkspur", "Millbrook", "Northfen",
    "Oakhollow", "Pinecrest", "Quarry Hill", "Redmarsh", "Stonebury", "Thornfield", "Wexley",
];

/// The `corpus` family.
pub(super) struct CorpusQa;

impl TaskFamily for CorpusQa {
    fn name(&self) -> &'static str {
        "corpus"
    }

    fn description(&self) -> &'static str {
        "joining facts across documents (BrowseComp-Plus-like): a corpus of company profiles and biographies, the birthplace of a company's founder; exact match"
    }

    fn corpus(&self) -> bool {
        true
    }

    fn generate(&self, rng: &mut Rng, target: usize) -> Generated {
        // Longer documents in larger corpora: a 10M-token corpus has some thousands.
        let most = (target / 20_000).clamp(2, 40);
        let mut names = Names::default();
        let company = names.company(rng);
        let founder = names.person(rng);
        let town = rng.pick(TOWNS);
        let mut documents = vec![
            profile(rng, &company, &founder, most),
            biography(rng, &founder, town, most),
        ];
        let mut total: usize = documents
            .iter()
            .map(|(title, text)| tokens::count(&record(0, title, text)))
            .sum();
        // Distractors of both shapes, each company with a founder of its own, each
        // person with a birthplace of their own, until the corpus has the size asked;
        // the last one cut to fit.
        while total < target {
            let (title, text) = distractor(rng, &mut names, most);
            let count = tokens::count(&record(0, &title, &text));
            if total + count <= target {
                total += count;
                documents.push((title, text));
                continue;
            }
            let room = (target - total).saturating_sub(tokens::count(&record(0, &title, "")));
            if room > 0 {
                let cut = tokens::truncate(&text, room).to_string();
                documents.push((title, cut));
            }
            break;
        }
        rng.shuffle(&mut documents);
        let context: String = documents
            .iter()
            .enumerate()
            .map(|(i, (title, text))| record(i + 1, title, text))
            .collect();
        Generated {
            question: format!(
                "In which town was the founder of {company} born? The corpus holds company profiles and biographies; answer with the town's name only."
            ),
            context,
            answer: town.to_string(),
            scorer: Scorer::Exact,
        }
    }
}

/// A distractor: a profile of another company or a biography of another person.
fn distractor(rng: &mut Rng, names: &mut Names, most: usize) -> (String, String) {
    if rng.chance(0.5) {
        let company = names.company(rng);
        let founder = names.person(rng);
        profile(rng, &company, &founder, most)
    } else {
        let person = names.person(rng);
        let town = rng.pick(TOWNS);
        biography(rng, &person, town, most)
    }
}

/// Names drawn without repeats, so that each company and each person is one entity.
#[derive(Default)]
struct Names {
    used: HashSet<String>,
}

impl Names {
    fn fresh(&mut self, rng: &mut Rng, make: impl Fn(&mut Rng) -> String) -> String {
        loop {
            let name = make(rng);
            if self.used.insert(name.clone()) {
                return name;
            }
        }
    }

    fn company(&mut self, rng: &mut Rng) -> String {
        self.fresh(rng, |rng| {
            format!("{} {}", word(rng, 2, 3), rng.pick(COMPANY_KINDS))
        })
    }

    fn person(&mut self, rng: &mut Rng) -> String {
        self.fresh(rng, |rng| {
            format!("{} {}", rng.pick(FIRST_NAMES), word(rng, 2, 4))
        })
    }
}

/// A capitalised made-up word of `low` to `high` syllables.
fn word(rng: &mut Rng, low: usize, high: usize) -> String {
    let mut word: String = (0..rng.range(low, high))
        .map(|_| rng.pick(SYLLABLES))
        .collect();
    if let Some(first) = word.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    word
}

/// A company profile naming its founder, among paragraphs of prose.
fn profile(rng: &mut Rng, company: &str, founder: &str, most: usize) -> (String, String) {
    let year = rng.range(1952, 2019);
    let fact = format!("{company} was founded in {year} by {founder}. ");
    (format!("{company}: company profile"), padded(rng, &fact, most))
}

/// A biography naming a person's birthplace, among paragraphs of prose.
fn biography(rng: &mut Rng, person: &str, town: &str, most: usize) -> (String, String) {
    let fact = format!("{person} was born in {town}. ");
    (format!("{person}: a biography"), padded(rng, &fact, most))
}

/// `fact` at a random place among 1 to `most` paragraphs.
fn padded(rng: &mut Rng, fact: &str, most: usize) -> String {
    let mut paragraphs: Vec<String> = (0..rng.range(1, most)).map(|_| paragraph(rng)).collect();
    let at = rng.below(paragraphs.len());
    paragraphs[at].insert_str(0, fact);
    paragraphs.concat()
}

/// One JSONL record, its `docid` of a fixed width (so that counting with `0` counts
/// the tokens any number gives, near enough).
fn record(number: usize, title: &str, text: &str) -> String {
    let mut line = serde_json::json!({
        "docid": docid(number),
        "title": title,
        "text": text,
    })
    .to_string();
    line.push('\n');
    line
}

fn docid(number: usize) -> String {
    format!("doc-{number:07}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Corpus;
    use crate::eval::{Family, Size, generate_task};

    fn task(tokens: u64, index: usize) -> (crate::eval::Task, Corpus) {
        let family = Family::named("corpus").expect("in the table");
        let task = generate_task(family, Size::new(tokens), 1, index);
        assert!(task.corpus);
        let corpus = Corpus::from_jsonl("t", task.context.as_deref().unwrap().as_bytes())
            .expect("the context is JSONL records");
        (task, corpus)
    }

    #[test]
    fn the_answer_joins_a_profile_and_a_biography_among_distractors() {
        for index in 0..5 {
            let (task, corpus) = task(16_000, index);
            let company = task
                .question
                .strip_prefix("In which town was the founder of ")
                .and_then(|rest| rest.split(" born?").next())
                .unwrap();
            let text = |d: &crate::corpus::Document| String::from_utf8_lossy(&d.text).into_owned();
            let profiles: Vec<String> = corpus
                .documents
                .iter()
                .map(text)
                .filter(|t| t.contains(&format!("{company} was founded")))
                .collect();
            assert_eq!(profiles.len(), 1, "one profile of {company}");
            let founder = profiles[0]
                .split(" by ")
                .nth(1)
                .and_then(|rest| rest.split(". ").next())
                .unwrap();
            let births: Vec<String> = corpus
                .documents
                .iter()
                .map(text)
                .filter(|t| t.contains(&format!("{founder} was born in ")))
                .collect();
            assert_eq!(births.len(), 1, "one biography of {founder}");
            assert!(births[0].contains(&format!("born in {}. ", task.answer)));
            assert!(
                corpus.documents.len() > 10,
                "distractors: {}",
                corpus.documents.len()
            );
            let names: HashSet<&str> = corpus.documents.iter().map(|d| d.name.as_str()).collect();
            assert_eq!(names.len(), corpus.documents.len(), "docids are unique");
        }
    }

    #[test]
    fn the_key_documents_land_anywhere_among_the_distractors() {
        let places: HashSet<usize> = (0..6)
            .map(|index| {
                let (task, corpus) = task(8_000, index);
                let company = task.question.split("founder of ").nth(1).unwrap();
                let company = company.split(" born?").next().unwrap();
                corpus
                    .documents
                    .iter()
                    .position(|d| String::from_utf8_lossy(&d.text).contains(&format!("{company} was founded")))
                    .unwrap()
            })
            .collect();
        assert!(places.len() > 2, "{places:?}");
    }
}
