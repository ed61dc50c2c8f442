// tb-delayd: the userspace delay stage as a program (its command line: delayd_main.cc).
#include "stage/main/delayd_main.h"

int main(int argc, char** argv) {
  return delayd_main(argc, argv);
}
