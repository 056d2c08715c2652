/*
 * cli.h - the subcommands of the one `1bit` binary. Each takes the arguments
 * after its name and returns a process exit code.
 */
#ifndef OB_CLI_H
#define OB_CLI_H

int ob_cmd_info(int argc, char **argv);
int ob_cmd_dump(int argc, char **argv);
int ob_cmd_serve(int argc, char **argv);
int ob_cmd_tokenize(int argc, char **argv);
int ob_cmd_convert(int argc, char **argv);
int ob_cmd_eval(int argc, char **argv);
int ob_cmd_run(int argc, char **argv);
int ob_cmd_bench(int argc, char **argv);
int ob_cmd_template(int argc, char **argv);
int ob_cmd_pull(int argc, char **argv);
int ob_cmd_list(int argc, char **argv);

/* Print "1bit: <message>" (with ob_last_error() appended when status < 0)
 * to stderr and return exit code 1. */
int ob_cli_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
