//! The `klaw-engine` binary: see `klaw-engine --help`.

fn main() -> std::process::ExitCode {
    klaw_engine::main()
}
