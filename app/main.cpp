// fabricsim command-line entry point (being written).
int main() { return 0; }
