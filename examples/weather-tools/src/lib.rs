//! Example: a crate of tools that depends on `klaw` alone, as `doc/writing-tools.md`
//! says (see its Cargo.toml: no `serde`, `serde_json`, `inventory` or `schemars`, and
//! no built-in tool group: its build is the core's few crates). Link it into an engine with
//! `use weather_tools as _;` (see `examples/my-engine`).

use klaw::{ToolError, tool};

/// Converts a temperature between Celsius, Fahrenheit and Kelvin.
#[tool(
    name = "convert_temperature",
    description_ru = "Переводит температуру между шкалами Цельсия (C), Фаренгейта (F) и Кельвина (K)",
    description_en = "Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K)",
    read_only,
    idempotent
)]
pub async fn convert_temperature(
    /// Значение температуры
    #[arg(description_en = "The temperature value")]
    value: f64,
    /// Исходная шкала: C, F или K
    #[arg(description_en = "Source scale: C, F or K")]
    from: String,
    /// Целевая шкала: C, F или K
    #[arg(description_en = "Target scale: C, F or K", default = String::from("C"))]
    to: String,
) -> Result<String, ToolError> {
    let celsius = match scale(&from, "/from")? {
        'C' => value,
        'F' => (value - 32.0) * 5.0 / 9.0,
        _ => value - 273.15,
    };
    if celsius < -273.15 {
        return Err(ToolError::invalid_arguments(
            "/value",
            "below absolute zero",
        ));
    }
    let out = match scale(&to, "/to")? {
        'C' => celsius,
        'F' => celsius * 9.0 / 5.0 + 32.0,
        _ => celsius + 273.15,
    };
    Ok(format!("{out:.2} {}", to.to_uppercase()))
}

fn scale(s: &str, pointer: &str) -> Result<char, ToolError> {
    match s.trim().to_uppercase().as_str() {
        "C" | "CELSIUS" => Ok('C'),
        "F" | "FAHRENHEIT" => Ok('F'),
        "K" | "KELVIN" => Ok('K'),
        other => Err(ToolError::invalid_arguments(
            pointer,
            format!("unknown scale `{other}`: use C, F or K"),
        )),
    }
}

/// Feels-like temperature in wind (the North American wind chill index).
#[tool(
    name = "wind_chill",
    description_ru = "Рассчитывает ощущаемую температуру на ветру (индекс охлаждения ветром), °C",
    description_en = "Compute the wind-chill (feels-like) temperature, in °C",
    read_only,
    idempotent,
    rename_all = "camelCase"
)]
pub async fn wind_chill(
    /// Температура воздуха, °C
    #[arg(description_en = "Air temperature, °C")]
    temp_c: f64,
    /// Скорость ветра, км/ч
    #[arg(description_en = "Wind speed, km/h")]
    wind_kmh: f64,
) -> Result<String, ToolError> {
    if wind_kmh < 0.0 {
        return Err(ToolError::invalid_arguments(
            "/windKmh",
            "wind speed cannot be negative",
        ));
    }
    if temp_c > 10.0 || wind_kmh < 4.8 {
        return Ok(format!(
            "{temp_c:.1} °C (no wind chill above 10 °C or below 4.8 km/h)"
        ));
    }
    let v = wind_kmh.powf(0.16);
    let feels = 13.12 + 0.6215 * temp_c - 11.37 * v + 0.3965 * temp_c * v;
    Ok(format!("{feels:.1} °C"))
}
