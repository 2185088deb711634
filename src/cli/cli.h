/* cli.h: the admin CLI's verbs (`agentic create`, `ls`, `inspect`, `rm` ...), reached only as
 * `agentic VERB`: they are never applets, so no link named after a verb can exist. */
#ifndef AGENTIC_CLI_H
#define AGENTIC_CLI_H

/* True when name is a verb. */
int cli_is_verb(const char *name);
/* Runs the verb argv[0] with its arguments; returns the exit status (2 for usage errors). */
int cli_main(int argc, char **argv);
/* One line per verb, for `agentic --help`. */
extern const char cli_usage[];

#endif
