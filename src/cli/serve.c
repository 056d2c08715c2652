/*
 * serve.c - `1bit serve`. The server (src/server) is not built yet; until it
 * is, this says what it will do and fails clearly so nobody mistakes a stub
 * for a running server.
 */
#include <stdio.h>

#include "cli.h"

int ob_cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr,
            "1bit serve: the OpenAI-compatible server is not built yet.\n"
            "When it lands, `1bit serve -m model.gguf` will load the model and serve\n"
            "/v1/chat/completions, /v1/completions, /v1/models, /health and /metrics on\n"
            "127.0.0.1:8080 (--host, --port), accepting llama-server's flags.\n"
            "Today `1bit info FILE` and `1bit dump FILE TENSOR` work.\n");
    return 2;
}
