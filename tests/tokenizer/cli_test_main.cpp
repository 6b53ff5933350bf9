// Stand-in for tools/infera/main.cpp with only the tokenize commands, for the end-to-end CLI test.
#include <cstdio>

#include "commands.h"
#include "infera/error.h"

int main(int argc, char** argv) {
  CLI::App app{"infera (tokenize commands only)"};
  app.require_subcommand(1);
  infera::cli::add_tokenize_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const infera::Error& e) {
    std::fprintf(stderr, "infera: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
