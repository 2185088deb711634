/* version.h: the release this tree builds. */
#ifndef AGENTIC_VERSION_H
#define AGENTIC_VERSION_H
#define AGENTIC_VERSION "0.1.0"
#endif
