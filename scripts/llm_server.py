"""A small local LLM behind llama.cpp's OpenAI-compatible HTTP server, for tests.

scripts/setup-llm.sh installs this file as <cache>/venv-llm/bin/klaw-llm-server (cache:
${KLAW_CACHE:-~/.cache/klaw}), next to xllamacpp (llama.cpp's server as a Python module)
and the SmolLM2-135M-Instruct GGUF, whose path it writes to <cache>/venv-llm/smollm2.gguf.path.

Start (loopback only; port 0 picks a free port):

    <cache>/venv-llm/bin/klaw-llm-server --port 18431
    # or: <cache>/venv-llm/bin/python scripts/llm_server.py --port 18431 [--model FILE.gguf]

Once the model is loaded it prints one line to stdout, `listening http://127.0.0.1:PORT`;
the port is already serving then. `GET /health` answers 503 while loading and
`{"status":"ok"}` when ready. Endpoints: /v1/models, /v1/chat/completions (stream: true
gives SSE chunks; response_format json_schema is grammar-constrained), /v1/completions.
The model id is `smollm2` (--alias); the request's "model" field is not checked.
It runs until SIGTERM or SIGINT, or, with --exit-on-stdin-eof, until its stdin closes
(so a test that spawns it with a piped stdin never leaves it behind).
"""

import argparse
import os
import signal
import sys
import threading


def default_model():
    # <venv>/smollm2.gguf.path, written by setup-llm.sh; the venv is sys.prefix.
    path_file = os.path.join(sys.prefix, "smollm2.gguf.path")
    try:
        with open(path_file, encoding="utf-8") as f:
            return f.readline().strip()
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="the .gguf file (default: the one in smollm2.gguf.path)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port (0: a free one, printed)")
    ap.add_argument("--ctx", type=int, default=2048, help="context size in tokens (2048)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (2)")
    ap.add_argument("--parallel", type=int, default=1, help="request slots (1)")
    ap.add_argument("--alias", default="smollm2", help="model id in /v1/models (smollm2)")
    ap.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")
    ap.add_argument("--exit-on-stdin-eof", action="store_true", help="stop when stdin closes")
    a = ap.parse_args()

    model = a.model or default_model()
    if not model:
        sys.exit("klaw-llm-server: no --model and no smollm2.gguf.path in %s "
                 "(run scripts/setup-llm.sh)" % sys.prefix)
    if not os.path.isfile(model):
        sys.exit("klaw-llm-server: model file not found: %s (run scripts/setup-llm.sh)" % model)

    try:
        import xllamacpp as xlc
    except ImportError as e:
        sys.exit("klaw-llm-server: xllamacpp is not importable with %s (%s); run "
                 "scripts/setup-llm.sh and start it with <cache>/venv-llm/bin/python"
                 % (sys.executable, e))

    p = xlc.CommonParams()
    p.model.path = model
    p.hostnames = [a.host]
    p.port = a.port
    p.n_ctx = a.ctx
    p.n_parallel = a.parallel
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.model_alias = {a.alias}
    p.n_gpu_layers = 0
    if a.quiet:
        p.verbosity = 1

    # Block the stop signals before llama.cpp starts its threads (they inherit the mask),
    # so that only this thread takes them, in sigwait below.
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)

    try:
        server = xlc.Server(p)  # returns once the model is loaded and the port serves
    except Exception as e:  # a busy port or a bad model file
        sys.exit("klaw-llm-server: the server did not start: %s" % e)
    print("listening %s" % server.listening_address, flush=True)

    if a.exit_on_stdin_eof:
        def watch_stdin():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            finally:
                os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch_stdin, daemon=True).start()

    signal.sigwait(stop)
    # llama.cpp's threads need no orderly stop for a test server: leave at once.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
