//! The right skill in a crowd (issue 46): 60 skills written like published ones (English
//! descriptions of 120–250 characters, as the public collections have them) and 40
//! requests, half Russian, half English, each with the skill it needs. It counts how
//! often that skill is in the system prompt's list: as the prompt was before (whole
//! lines by name until the budget), as it is (every name, descriptions shortened), and,
//! at a budget too small for the names, in relevance order against name order.
//!
//! Run with: cargo test -p klaw-tools --lib skills::prompt::eval -- --nocapture

use super::super::Catalog;
use super::tests::skill;
use super::{prompt_section, prompt_section_for};

const SKILLS: [(&str, &str); 60] = [
    (
        "algorithmic-art",
        "Creates algorithmic and generative art with p5.js: flow fields, particle systems, seeded randomness. Use when the user asks for generative art, creative coding or code-based visuals.",
    ),
    (
        "api-docs",
        "Writes reference documentation for HTTP APIs from code or OpenAPI specs: endpoints, parameters, examples, error codes. Use when documenting an API.",
    ),
    (
        "brand-guidelines",
        "Applies the company's brand colors, typography and tone of voice to documents, slides and web pages. Use when output must look on-brand.",
    ),
    (
        "calendar-planner",
        "Plans schedules and calendar events: finds free slots, proposes meeting times across time zones, drafts invitations. Use for scheduling and agendas.",
    ),
    (
        "canvas-design",
        "Designs posters, flyers and single-page visual art as PNG or PDF with a deliberate design philosophy. Use when the user asks for a poster, a flyer or a piece of visual design.",
    ),
    (
        "changelog",
        "Turns commits and merged pull requests into a user-facing changelog grouped by features, fixes and breaking changes. Use for release notes or a CHANGELOG entry.",
    ),
    (
        "code-review",
        "Reviews a diff or pull request for bugs, security issues, readability and tests, with concrete suggestions. Use when asked to review code.",
    ),
    (
        "commit-message",
        "Writes a clear git commit message from the staged diff following Conventional Commits. Use when the user wants a commit message.",
    ),
    (
        "csv-cleaner",
        "Cleans CSV files: fixes encodings and delimiters, removes duplicates, normalizes dates and numbers. Use when a CSV file is messy or will not import.",
    ),
    (
        "data-viz",
        "Builds charts and dashboards from tabular data with matplotlib or Vega-Lite: bar, line, scatter, heatmaps. Use when the user wants a chart or a plot.",
    ),
    (
        "db-migrations",
        "Writes and reviews SQL schema migrations for PostgreSQL and SQLite, with safe rollouts and rollbacks. Use when changing a database schema.",
    ),
    (
        "dependency-audit",
        "Audits project dependencies for known vulnerabilities, outdated versions and licenses (npm, pip, cargo). Use to check dependencies.",
    ),
    (
        "dockerfile",
        "Writes and optimizes Dockerfiles and docker-compose files: small images, multi-stage builds, caching. Use for containerizing an app.",
    ),
    (
        "docx",
        "Creates, edits and analyzes Word documents (.docx): tracked changes, comments, formatting, tables, text extraction. Use when working with Word files.",
    ),
    (
        "email-drafts",
        "Drafts professional emails and replies in the right tone: follow-ups, requests, apologies, announcements. Use when the user needs to write an email.",
    ),
    (
        "excel-formulas",
        "Explains and writes spreadsheet formulas (VLOOKUP, XLOOKUP, INDEX/MATCH, array formulas) and fixes broken ones. Use for formula questions.",
    ),
    (
        "expense-report",
        "Builds expense reports from receipts and bank exports: categories, totals, currency conversion. Use when the user wants to report expenses.",
    ),
    (
        "git-workflow",
        "Helps with git: branching, rebasing, resolving merge conflicts, undoing mistakes, cleaning history. Use for git problems.",
    ),
    (
        "gif-creator",
        "Makes small animated GIFs optimized for Slack and chat: emoji-sized loops, text animations, size limits. Use when the user wants an animated GIF.",
    ),
    (
        "i18n",
        "Extracts UI strings and manages translations and locale files (gettext, ICU, JSON) for apps. Use for internationalization and localization.",
    ),
    (
        "image-editing",
        "Edits raster images with Pillow and ImageMagick: resize, crop, convert formats, compress, add watermarks. Use for image processing.",
    ),
    (
        "incident-postmortem",
        "Writes blameless incident postmortems: timeline, impact, root cause, action items. Use after an outage or incident.",
    ),
    (
        "internal-comms",
        "Writes internal communications: status reports, leadership updates, company newsletters, FAQs, incident notes. Use for messages to colleagues.",
    ),
    (
        "invoice-generator",
        "Creates invoices as PDF from client details, line items, taxes and payment terms. Use when the user needs to bill a client.",
    ),
    (
        "json-schema",
        "Writes and validates JSON Schema documents and checks JSON data against them. Use for JSON validation or schema design.",
    ),
    (
        "k8s-manifests",
        "Writes Kubernetes manifests and Helm charts: deployments, services, ingress, config maps, resource limits. Use for deploying to Kubernetes.",
    ),
    (
        "latex-papers",
        "Writes and fixes LaTeX documents: papers, formulas, bibliographies with BibTeX, beamer slides. Use when working with LaTeX.",
    ),
    (
        "legal-contracts",
        "Reviews and drafts contracts and NDAs: flags risky clauses, missing terms, obligations and deadlines. Use for legal document review.",
    ),
    (
        "log-analysis",
        "Analyzes application and server logs: finds errors, spikes, slow requests and their causes. Use when investigating logs.",
    ),
    (
        "mcp-builder",
        "Guides building MCP servers that expose tools to LLMs, in Python (FastMCP) or TypeScript. Use when creating an MCP server.",
    ),
    (
        "meeting-notes",
        "Turns meeting transcripts or recordings' text into structured notes: decisions, action items, owners. Use for meeting summaries.",
    ),
    (
        "mermaid-diagrams",
        "Draws diagrams as Mermaid code: flowcharts, sequence diagrams, ER diagrams, Gantt charts. Use when the user wants a diagram.",
    ),
    (
        "nutrition-planner",
        "Plans meals and recipes for a diet and calorie target, with shopping lists. Use for meal planning and nutrition.",
    ),
    (
        "ocr",
        "Extracts text from scanned documents and photos with Tesseract OCR, in many languages. Use when text must be read from an image or a scan.",
    ),
    (
        "pdf",
        "Processes PDF files: extracts text and tables, fills forms, merges and splits documents, adds watermarks. Use whenever the user works with PDF files.",
    ),
    (
        "pitch-deck",
        "Structures startup pitch decks: problem, solution, market, traction, team, ask, with slide-by-slide content. Use for investor presentations.",
    ),
    (
        "pptx",
        "Creates and edits PowerPoint presentations (.pptx): layouts, speaker notes, charts, templates. Use when working with slides or presentations.",
    ),
    (
        "prompt-engineering",
        "Improves prompts for LLMs: structure, examples, output formats, evaluation. Use when the user wants a better prompt.",
    ),
    (
        "python-tests",
        "Writes pytest tests: fixtures, parametrization, mocks, coverage. Use when adding tests to Python code.",
    ),
    (
        "readme-writer",
        "Writes README files for repositories: overview, installation, usage, examples, badges. Use when a project needs a README.",
    ),
    (
        "regex-helper",
        "Writes, explains and debugs regular expressions for many engines, with test cases. Use for regex questions.",
    ),
    (
        "resume",
        "Writes and tailors CVs and résumés and cover letters to a job posting. Use when the user applies for a job.",
    ),
    (
        "rust-errors",
        "Explains Rust compiler errors (borrow checker, lifetimes, traits) and proposes fixes. Use for Rust compile errors.",
    ),
    (
        "security-review",
        "Reviews code and configuration for security flaws: injections, secrets, authentication, OWASP Top 10. Use for a security audit.",
    ),
    (
        "seo-audit",
        "Audits web pages for SEO: titles, meta descriptions, headings, links, performance, structured data. Use for search optimization.",
    ),
    (
        "shell-scripts",
        "Writes robust bash scripts with error handling, argument parsing and portability. Use when the user needs a shell script.",
    ),
    (
        "skill-creator",
        "Guides creating effective skills: SKILL.md structure, descriptions, scripts, references, testing. Use when the user wants to create or update a skill.",
    ),
    (
        "slack-gif",
        "Posts updates and summaries formatted for Slack with blocks and threads. Use for Slack messages.",
    ),
    (
        "social-media",
        "Writes posts for Twitter/X, LinkedIn and Telegram channels with hashtags and a posting schedule. Use for social media content.",
    ),
    (
        "sql-queries",
        "Writes and optimizes SQL queries: joins, window functions, indexes, query plans. Use for SQL questions.",
    ),
    (
        "system-design",
        "Designs software architecture: components, data flow, scaling, trade-offs, diagrams. Use for system design questions.",
    ),
    (
        "terraform",
        "Writes Terraform for cloud infrastructure (AWS, GCP, Azure): modules, state, plans. Use for infrastructure as code.",
    ),
    (
        "theme-factory",
        "Applies ready-made color and font themes to slides, documents and HTML artifacts. Use to style an artifact with a theme.",
    ),
    (
        "translation",
        "Translates documents between languages keeping formatting and terminology, with a glossary. Use when the user wants a translation.",
    ),
    (
        "travel-planner",
        "Plans trips: itineraries, flights, hotels, budgets, visas and local transport. Use when the user plans travel.",
    ),
    (
        "unit-converter",
        "Converts units and currencies with explained calculations: length, weight, temperature, money. Use for conversions.",
    ),
    (
        "video-editing",
        "Cuts, joins, trims and transcodes video with ffmpeg; adds subtitles and extracts audio. Use for video processing.",
    ),
    (
        "web-scraping",
        "Scrapes websites politely: fetches pages, parses HTML, handles pagination and rate limits, exports data. Use when data must be collected from web pages.",
    ),
    (
        "webapp-testing",
        "Tests local web applications with Playwright: clicks through pages, takes screenshots, reads console logs. Use to test a web app's UI.",
    ),
    (
        "xlsx",
        "Creates, edits and analyzes spreadsheets (.xlsx, .csv): formulas, formatting, charts, pivot tables, data analysis. Use whenever the user works with Excel files or spreadsheets.",
    ),
];

const REQUESTS: [(&str, &str); 40] = [
    ("Fill in this PDF form with my passport details", "pdf"),
    ("Merge these three PDF files into one", "pdf"),
    ("Make a pivot table from sales.xlsx by region", "xlsx"),
    ("Add a chart to my Excel spreadsheet", "xlsx"),
    (
        "Edit the Word document and accept all tracked changes",
        "docx",
    ),
    ("Make slides for Monday's presentation", "pptx"),
    ("Review this pull request for bugs", "code-review"),
    (
        "Write a commit message for the staged changes",
        "commit-message",
    ),
    ("Write a Dockerfile for my Flask app", "dockerfile"),
    ("Deploy this service to Kubernetes", "k8s-manifests"),
    (
        "Why does the borrow checker reject this Rust code?",
        "rust-errors",
    ),
    (
        "Draw a sequence diagram of the login flow",
        "mermaid-diagrams",
    ),
    ("Scrape product prices from this website", "web-scraping"),
    (
        "Trim the first 10 seconds of this video and add subtitles",
        "video-editing",
    ),
    ("Read the text from this scanned receipt", "ocr"),
    ("Plan a 5-day trip to Georgia", "travel-planner"),
    ("Write the release notes for version 2.0", "changelog"),
    ("Create an animated GIF for Slack", "gif-creator"),
    ("I want to create a new skill for our team", "skill-creator"),
    (
        "Test the checkout page of my local web app",
        "webapp-testing",
    ),
    ("Заполни эту PDF-форму моими данными", "pdf"),
    ("Извлеки таблицы из PDF отчёта", "pdf"),
    ("Построй сводную таблицу в Excel по регионам", "xlsx"),
    ("Сделай презентацию PowerPoint для инвесторов", "pptx"),
    ("Отредактируй документ Word и прими все исправления", "docx"),
    ("Проверь мой код на ошибки перед слиянием", "code-review"),
    ("Напиши Dockerfile для моего приложения", "dockerfile"),
    (
        "Нарисуй диаграмму последовательности для входа в систему",
        "mermaid-diagrams",
    ),
    ("Собери цены с сайта конкурента", "web-scraping"),
    ("Обрежь видео и добавь субтитры", "video-editing"),
    ("Распознай текст на фотографии документа", "ocr"),
    ("Спланируй поездку в Грузию на пять дней", "travel-planner"),
    ("Напиши заметки о релизе для версии 2.0", "changelog"),
    ("Составь резюме под эту вакансию", "resume"),
    ("Переведи этот договор на английский", "translation"),
    ("Проверь договор на рискованные условия", "legal-contracts"),
    ("Напиши SQL-запрос с оконными функциями", "sql-queries"),
    ("Составь план питания на неделю", "nutrition-planner"),
    (
        "Напиши письмо клиенту с извинениями за задержку",
        "email-drafts",
    ),
    (
        "Разбери логи сервера и найди причину ошибок",
        "log-analysis",
    ),
];

fn catalog() -> Catalog {
    let mut skills: Vec<_> = SKILLS.iter().map(|(n, d)| skill(n, d)).collect();
    skills.sort_by(|a, b| a.name().cmp(b.name()));
    Catalog {
        skills,
        ..Catalog::default()
    }
}

/// Whether the skill `name` is listed in a prompt section.
fn listed(section: &str, name: &str) -> bool {
    section.contains(&format!("- {name}:")) || section.contains(&format!("- {name}\n"))
}

/// The section as it was before issue 46: whole lines by name until the budget.
fn before(catalog: &Catalog, budget: usize) -> String {
    let mut s = String::new();
    let mut used = 0;
    for k in &catalog.skills {
        let line = format!("- {}: {}\n", k.name(), k.description());
        if used + line.chars().count() > budget {
            break;
        }
        used += line.chars().count();
        s.push_str(&line);
    }
    s
}

#[test]
fn the_needed_skill_is_in_the_prompt() {
    let c = catalog();
    let count = |f: &dyn Fn(&str) -> String| {
        REQUESTS
            .iter()
            .filter(|(q, need)| listed(&f(q), need))
            .count()
    };
    let was = count(&|_| before(&c, 8000));
    let now = count(&|q| prompt_section_for(&c, 8000, Some(q)).unwrap());
    // A budget too small for the 60 names (about a third of them fit).
    let tight = 250;
    let by_name = count(&|_| prompt_section(&c, tight).unwrap());
    let relevant = count(&|q| prompt_section_for(&c, tight, Some(q)).unwrap());
    let (en, ru) = REQUESTS.split_at(20);
    let relevant_of = |rs: &[(&str, &str)]| {
        rs.iter()
            .filter(|(q, need)| listed(&prompt_section_for(&c, tight, Some(q)).unwrap(), need))
            .count()
    };
    eprintln!(
        "60 skills, 40 requests: at 8000 characters the needed skill is listed {was}/40 before, {now}/40 now; \
         at {tight} characters (names do not all fit) {by_name}/40 by name, {relevant}/40 by relevance \
         (English {}/20, Russian {}/20)",
        relevant_of(en),
        relevant_of(ru)
    );
    assert!(now >= 38, "{now}/40");
    assert!(was < now, "{was} then, {now} now");
    assert!(
        relevant > by_name,
        "{relevant} by relevance, {by_name} by name"
    );
}
