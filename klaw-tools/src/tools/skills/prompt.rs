//! The skills' part of the agent's system prompt: each skill's name and description,
//! within a budget of characters. Every name fits whenever names alone can: past the
//! budget the descriptions are shortened (all to the same length) before any name is
//! dropped; when even the names do not fit, the skills most relevant to the user's
//! message come first ([`relevance`]) and the prompt says how many were left out —
//! never a silent cut.

use std::collections::{HashMap, HashSet};

use super::Catalog;

/// The system prompt's section on `catalog`'s skills, at most about `budget` characters
/// of entries, by name; `None` when there are no skills.
pub fn prompt_section(catalog: &Catalog, budget: usize) -> Option<String> {
    prompt_section_for(catalog, budget, None)
}

/// [`prompt_section`] for a conversation whose user's message is `query`: when not
/// every name fits, the skills most relevant to it are listed first.
pub fn prompt_section_for(catalog: &Catalog, budget: usize, query: Option<&str>) -> Option<String> {
    if catalog.skills.is_empty() {
        return None;
    }
    let mut s = String::from(
        "Skills (instructions for particular tasks): when a task matches a skill's \
         description, call skill_load with its name first and follow what it says. \
         Do not load skills the task does not need.\n",
    );
    // One line each, whatever the description's line breaks.
    let entries: Vec<(&str, String)> = catalog
        .skills
        .iter()
        .map(|k| {
            (
                k.name(),
                k.description()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        })
        .collect();
    let longest = entries
        .iter()
        .map(|(_, d)| d.chars().count())
        .max()
        .unwrap_or(0);
    let total = |cap: usize| -> usize {
        entries
            .iter()
            .map(|(n, d)| line(n, d, cap).chars().count())
            .sum()
    };
    if total(longest) <= budget {
        for (n, d) in &entries {
            s.push_str(&line(n, d, longest));
        }
        return Some(s);
    }
    if total(0) <= budget {
        // The longest description length at which every line fits (binary search:
        // the total grows with the length).
        let (mut lo, mut hi) = (0, longest);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if total(mid) <= budget {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        for (n, d) in &entries {
            s.push_str(&line(n, d, lo));
        }
        s.push_str(&format!(
            "(Descriptions shortened to fit skills.promptBudgetChars, {budget}; skill_list gives them whole.)\n"
        ));
        return Some(s);
    }
    // Not even the names fit: the most relevant first, as many as fit.
    let texts: Vec<String> = entries.iter().map(|(n, d)| format!("{n} {d}")).collect();
    let order = relevance(query.unwrap_or(""), &texts);
    let mut used = 0usize;
    let mut listed = Vec::new();
    for i in order {
        let l = line(entries[i].0, "", 0);
        let n = l.chars().count();
        if used + n > budget {
            continue;
        }
        used += n;
        listed.push(l);
    }
    let left = catalog.skills.len() - listed.len();
    for l in &listed {
        s.push_str(l);
    }
    s.push_str(&format!(
        "{left} more skill(s) are not listed here (skills.promptBudgetChars is {budget}); \
         call skill_list to see every skill.\n"
    ));
    Some(s)
}

/// A skill's line with its description cut to `cap` characters (`…` marks a cut); a
/// cap of 0 gives the name alone.
fn line(name: &str, description: &str, cap: usize) -> String {
    if cap == 0 || description.is_empty() {
        return format!("- {name}\n");
    }
    if description.chars().count() <= cap {
        return format!("- {name}: {description}\n");
    }
    let short: String = description.chars().take(cap).collect();
    format!("- {name}: {}…\n", short.trim_end())
}

/// The indices of `texts` (a skill's name and description each), most relevant to
/// `query` first: the words they share, each weighted by how rare it is among the
/// texts (words compared by their first five letters, which is enough for Russian
/// and English endings); ties, and a query that shares nothing, in the texts' order.
pub fn relevance(query: &str, texts: &[String]) -> Vec<usize> {
    let docs: Vec<HashSet<String>> = texts.iter().map(|t| stems(t).collect()).collect();
    let mut df: HashMap<&str, usize> = HashMap::new();
    for d in &docs {
        for w in d {
            *df.entry(w.as_str()).or_default() += 1;
        }
    }
    let n = texts.len() as f64;
    let q: HashSet<String> = stems(query).collect();
    let score = |d: &HashSet<String>| -> f64 {
        q.iter()
            .filter(|w| d.contains(*w))
            .map(|w| (n / df.get(w.as_str()).copied().unwrap_or(1) as f64).ln() + 0.1)
            .sum()
    };
    let scores: Vec<f64> = docs.iter().map(score).collect();
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

/// The words of `text` of three letters or more, lowercased, cut to five letters
/// (`ё` as `е`).
fn stems(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| w.to_lowercase().replace('ё', "е").chars().take(5).collect())
}

#[cfg(test)]
mod eval;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{Origin, Skill, frontmatter};
    use super::*;

    pub(super) fn skill(name: &str, description: &str) -> Skill {
        // Quoted (a JSON string is YAML): descriptions have colons.
        let quoted = serde_json::to_string(description).unwrap();
        let text = format!("---\nname: {name}\ndescription: {quoted}\n---\n");
        let parsed = frontmatter::parse(&text, name).unwrap();
        Skill {
            origin: Origin::Workspace,
            root: "/ws".into(),
            folder: format!("skills/{name}"),
            frontmatter: Arc::new(parsed.frontmatter),
            warnings: Arc::from([]),
        }
    }

    fn catalog(n: usize) -> Catalog {
        let skills = (0..n)
            .map(|i| skill(&format!("skill-{i:03}"), &format!("Does\n  thing {i}.")))
            .collect();
        Catalog {
            skills,
            ..Catalog::default()
        }
    }

    #[test]
    fn every_skill_within_the_budget_and_a_count_past_it() {
        assert_eq!(prompt_section(&catalog(0), 8000), None);
        let all = prompt_section(&catalog(3), 8000).unwrap();
        assert!(all.contains("- skill-000: Does thing 0.\n"), "{all}");
        assert!(all.contains("- skill-002: Does thing 2.\n"), "{all}");
        assert!(
            !all.contains("not listed") && !all.contains("shortened"),
            "{all}"
        );
        // Lines of 27 (0-9), 28 (10-99) and 29 characters: 150 whole lines do not fit
        // in 2850; every name does, its description shortened (19 characters a line).
        let cut = prompt_section(&catalog(150), 2850).unwrap();
        for i in [0, 99, 100, 149] {
            assert!(cut.contains(&format!("- skill-{i:03}")), "{cut}");
        }
        assert!(cut.contains("- skill-100: Does…\n"), "{cut}");
        assert!(!cut.contains("not listed"), "{cut}");
        assert!(
            cut.contains("Descriptions shortened to fit skills.promptBudgetChars, 2850"),
            "{cut}"
        );
        // Names alone: 12 characters each.
        let names = prompt_section(&catalog(150), 1800).unwrap();
        assert!(
            names.contains("- skill-149\n") && !names.contains("Does"),
            "{names}"
        );
        // Fewer: 100 names, then the count.
        let some = prompt_section(&catalog(150), 1200).unwrap();
        assert!(
            some.contains("- skill-099\n") && !some.contains("- skill-100"),
            "{some}"
        );
        assert!(
            some.contains("50 more skill(s) are not listed here (skills.promptBudgetChars is 1200); call skill_list"),
            "{some}"
        );
        let none = prompt_section(&catalog(2), 0).unwrap();
        assert!(none.contains("2 more skill(s)"), "{none}");
    }

    #[test]
    fn when_names_do_not_fit_the_relevant_come_first() {
        let c = Catalog {
            skills: vec![
                skill("alpha", "Writes poems."),
                skill("docx", "Creates and edits Word documents (.docx)."),
                skill("pdf", "Fills PDF forms and extracts text from PDF files."),
                skill("xlsx", "Works with spreadsheets: формулы, таблицы Excel."),
            ],
            ..Catalog::default()
        };
        let s = prompt_section_for(&c, 8, Some("Fill in this PDF form for me")).unwrap();
        assert!(
            s.contains("- pdf\n") && s.contains("3 more skill(s)"),
            "{s}"
        );
        let s = prompt_section_for(&c, 8, Some("Посчитай итоги в таблице")).unwrap();
        assert!(s.contains("- xlsx\n"), "{s}");
        // Nothing in common: by name.
        let s = prompt_section_for(&c, 8, Some("hello")).unwrap();
        assert!(s.contains("- alpha\n"), "{s}");
    }
}
