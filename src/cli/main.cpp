#include "src/cli/cli.hpp"

int main(int argc, char** argv) { return dropbench::run_cli(argc, argv); }
