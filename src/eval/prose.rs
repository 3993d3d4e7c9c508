//! Generated prose: the haystack of `niah` tasks, sentence after sentence from a few
//! templates and word lists, drawn from the task's [`Rng`].

use super::rng::Rng;

const SUBJECTS: &[&str] = &[
    "The old lighthouse keeper",
    "A travelling merchant",
    "The village council",
    "Our neighbour",
    "The young engineer",
    "A quiet librarian",
    "The river pilot",
    "The orchard owner",
    "A visiting botanist",
    "The night watchman",
    "The harbour master",
    "A retired teacher",
    "The baker's daughter",
    "The surveyor",
    "A wandering musician",
    "The mill foreman",
    "The museum curator",
    "A patient gardener",
    "The ferry captain",
    "The school choir",
];
const VERBS: &[&str] = &[
    "walked along",
    "painted",
    "repaired",
    "wrote about",
    "counted",
    "described",
    "photographed",
    "measured",
    "cleaned",
    "visited",
    "remembered",
    "studied",
    "sketched",
    "guarded",
    "crossed",
    "admired",
    "rebuilt",
    "mapped",
    "catalogued",
    "watched",
];
const OBJECTS: &[&str] = &[
    "the stone bridge",
    "the northern meadow",
    "an abandoned greenhouse",
    "the copper weathervane",
    "the winding canal",
    "a row of chestnut trees",
    "the market square",
    "the clock tower",
    "a field of lavender",
    "the chapel roof",
    "the salt marsh",
    "an old railway station",
    "the orchard wall",
    "the fishing boats",
    "a narrow alley",
    "the granary",
    "the hill above the town",
    "the tide pools",
    "a forgotten well",
    "the eastern gate",
];
const TIMES: &[&str] = &[
    "early in the morning",
    "after the spring rain",
    "during the long winter",
    "before the harvest",
    "on a windy afternoon",
    "late one autumn evening",
    "at the turn of the season",
    "while the bells rang",
    "in the heat of July",
    "under a pale moon",
    "as the fog lifted",
    "on market day",
];
const CLAUSES: &[&str] = &[
    "and nobody seemed to notice",
    "because the weather had finally changed",
    "although the path was muddy",
    "while children played nearby",
    "as the town slowly woke",
    "and wrote a short note about it",
    "before anyone else arrived",
    "though the light was fading",
    "and then went home for supper",
    "as had been done for years",
];

/// One sentence, ending in a space.
fn sentence(rng: &mut Rng, out: &mut String) {
    out.push_str(rng.pick(SUBJECTS));
    out.push(' ');
    out.push_str(rng.pick(VERBS));
    out.push(' ');
    out.push_str(rng.pick(OBJECTS));
    out.push(' ');
    out.push_str(rng.pick(TIMES));
    if rng.chance(0.5) {
        out.push(' ');
        out.push_str(rng.pick(CLAUSES));
    }
    out.push_str(". ");
}

/// One paragraph of 3 to 7 sentences, one line.
pub fn paragraph(rng: &mut Rng) -> String {
    let mut out = String::with_capacity(512);
    for _ in 0..rng.range(3, 7) {
        sentence(rng, &mut out);
    }
    out.pop();
    out.push('\n');
    out
}
