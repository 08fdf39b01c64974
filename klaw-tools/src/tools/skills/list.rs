//! `skill_list`: every skill in effect, with its origin, and the skills skipped.

use serde::Serialize;

use super::{Origin, catalog};
use crate::{ToolContext, ToolError, ToolSchema, tool};

/// One skill in effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillInfo {
    /// Имя навыка (его передают в skill_load)
    #[schema(description_en = "The skill's name (what skill_load takes)")]
    pub name: String,
    /// Что навык делает и когда его применять
    #[schema(description_en = "What the skill does and when to use it")]
    pub description: String,
    /// Откуда навык: system (каталог данных), path (skills.paths), user (~/.claude, ~/.agents) или workspace (рабочая область)
    #[schema(
        description_en = "Where it is from: system (the data dir), path (skills.paths), user (~/.claude, ~/.agents) or workspace"
    )]
    pub origin: Origin,
    /// Навык с тем же именем из папки ниже по порядку, который этот навык заслоняет
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(
        description_en = "The skill of the same name in a lower folder that this one shadows"
    )]
    pub shadows: Option<String>,
    /// Инструменты, которые навык разрешает (allowed-tools), если он их называет
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(description_en = "The tools the skill allows (allowed-tools), when it names them")]
    pub allowed_tools: Option<Vec<String>>,
    /// Предупреждения: что в навыке нарушает правила формата, но не мешает его загрузить
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(
        description_en = "Warnings: what in the skill breaks the format's rules without stopping it from loading"
    )]
    pub warnings: Vec<String>,
}

/// A skill that was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedSkill {
    /// Имя навыка (имя его папки)
    #[serde(skip_serializing_if = "String::is_empty")]
    #[schema(description_en = "The skill's name (its folder's)")]
    pub name: String,
    /// Файл или папка навыка
    #[schema(description_en = "The skill's file or folder")]
    pub path: String,
    /// Что с ним не так
    #[schema(description_en = "What is wrong with it")]
    pub problem: String,
}

/// The answer of `skill_list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToolSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillList {
    /// Навыки по именам
    #[schema(description_en = "The skills, by name")]
    pub skills: Vec<SkillInfo>,
    /// Навыки, пропущенные из-за ошибок (их не загрузить, пока их не исправят)
    #[schema(description_en = "Skills skipped for errors (they cannot be loaded until fixed)")]
    pub skipped: Vec<SkippedSkill>,
}

/// Lists the skills.
#[tool(
    name = "skill_list",
    title_ru = "Список навыков",
    title_en = "List skills",
    description_ru = "Показывает все навыки (skills): имя, описание, откуда навык (system — каталог данных, workspace — рабочая область; навык рабочей области заслоняет системный с тем же именем, shadows это называет) и пропущенные навыки с ошибками. Изменения в папках skills/ видны сразу, без перезапуска. Чтобы применить навык, вызови skill_load с его именем.",
    description_en = "Lists every skill: name, description, origin (system: the data dir; workspace: the workspace; a workspace skill shadows a system skill of the same name, which `shadows` names) and the skills skipped for errors. Changes in the skills/ folders show at once, without a restart. To use a skill, call skill_load with its name.",
    read_only
)]
pub async fn skill_list(ctx: ToolContext) -> Result<SkillList, ToolError> {
    let catalog = catalog(&ctx).await?;
    let skills = catalog
        .skills
        .iter()
        .map(|s| SkillInfo {
            name: s.name().to_owned(),
            description: s.description().to_owned(),
            origin: s.origin,
            shadows: catalog
                .shadowed(s.name())
                .map(|old| format!("{} skill at {}", old.origin, old.dir().display())),
            allowed_tools: s.frontmatter.allowed_tools.clone(),
            warnings: s.warnings.to_vec(),
        })
        .collect();
    let skipped = catalog
        .malformed
        .iter()
        .map(|m| SkippedSkill {
            name: m.name.clone(),
            path: m.path.display().to_string(),
            problem: m.problem.clone(),
        })
        .collect();
    Ok(SkillList { skills, skipped })
}
