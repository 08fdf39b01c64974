//! The skills' part of the agent's system prompt: each skill's name and description,
//! within a budget of characters; past it, how many were left out — never a silent cut.

use super::Catalog;

/// The system prompt's section on `catalog`'s skills, at most about `budget` characters
/// of entries; `None` when there are no skills.
pub fn prompt_section(catalog: &Catalog, budget: usize) -> Option<String> {
    if catalog.skills.is_empty() {
        return None;
    }
    let mut s = String::from(
        "Skills (instructions for particular tasks): when a task matches a skill's \
         description, call skill_load with its name first and follow what it says. \
         Do not load skills the task does not need.\n",
    );
    let mut used = 0usize;
    let mut listed = 0usize;
    for skill in &catalog.skills {
        // One line each, whatever the description's line breaks.
        let description = skill
            .description()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let line = format!("- {}: {description}\n", skill.name());
        let n = line.chars().count();
        if used + n > budget {
            break;
        }
        used += n;
        listed += 1;
        s.push_str(&line);
    }
    let left = catalog.skills.len() - listed;
    if left > 0 {
        s.push_str(&format!(
            "{left} more skill(s) are not listed here (skills.promptBudgetChars is {budget}); \
             call skill_list to see every skill.\n"
        ));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{Origin, Skill, frontmatter};
    use super::*;

    fn catalog(n: usize) -> Catalog {
        let skills = (0..n)
            .map(|i| {
                let name = format!("skill-{i:03}");
                let text = format!("---\nname: {name}\ndescription: Does\n  thing {i}.\n---\n");
                let parsed = frontmatter::parse(&text, &name).unwrap();
                Skill {
                    origin: Origin::Workspace,
                    root: "/ws".into(),
                    folder: format!("skills/{name}"),
                    frontmatter: Arc::new(parsed.frontmatter),
                    warnings: Arc::from([]),
                }
            })
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
        assert!(!all.contains("not listed"), "{all}");
        // Lines of 27 (0-9), 28 (10-99) and 29 characters: 100 fit in 2790, not 101.
        let cut = prompt_section(&catalog(150), 2790).unwrap();
        assert!(cut.contains("- skill-099:"), "{cut}");
        assert!(!cut.contains("- skill-100:"), "{cut}");
        assert!(
            cut.contains("50 more skill(s) are not listed here (skills.promptBudgetChars is 2790); call skill_list"),
            "{cut}"
        );
        let none = prompt_section(&catalog(2), 0).unwrap();
        assert!(none.contains("2 more skill(s)"), "{none}");
    }
}
