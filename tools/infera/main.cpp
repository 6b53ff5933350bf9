#include <cstdio>
#include <exception>

#include "commands.h"
#include "infera/error.h"

int main(int argc, char** argv) {
  CLI::App app{"infera: a fast inference engine for small transformer models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "infera 0.1.0");
  infera::cli::add_run_command(app);
  infera::cli::add_chat_command(app);
  infera::cli::add_logits_command(app);
  infera::cli::add_perplexity_command(app);
  infera::cli::add_eval_command(app);
  infera::cli::add_tokenize_commands(app);
  infera::cli::add_encoder_commands(app);
  infera::cli::add_decide_command(app);
  infera::cli::add_bench_command(app);
  infera::cli::remember_command_line(argc, argv);
  infera::cli::add_quantize_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const infera::Error& e) {
    std::fprintf(stderr, "infera: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "infera: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
