// Native reference for the N-Queens benchmark: single-threaded plain backtracking.
//
// Written for pytfrt (not copied from the playground): the same algorithm as every Python
// variant -- one queen per column, a queen is legal if no earlier queen shares its row or a
// diagonal -- counted by recursion.  Usage: nqueens_1thread <n> [<placement rows>...]
// Prints "Num of solutions: <count>" and "Time = <microseconds> us" (steady clock).
// Built by `pytfrt bench nqueens` with `g++ -O2` into a temporary directory.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

static bool is_valid(const std::vector<int>& board, int col, int row) {
  for (int c = 0; c < col; ++c) {
    int placed = board[c];
    if (placed == row || std::abs(placed - row) == col - c) return false;
  }
  return true;
}

static long long solve(int n, int col, std::vector<int>& board) {
  if (col == n) return 1;
  long long count = 0;
  for (int row = 0; row < n; ++row) {
    if (is_valid(board, col, row)) {
      board[col] = row;
      count += solve(n, col + 1, board);
    }
  }
  return count;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <n_queens>\n", argv[0]);
    return 2;
  }
  int n = std::atoi(argv[1]);
  if (n < 1 || n > 18) {
    std::fprintf(stderr, "n must be in 1..18, got %d\n", n);
    return 2;
  }
  std::vector<int> board(n, 0);
  auto start = std::chrono::steady_clock::now();
  long long count = solve(n, 0, board);
  auto stop = std::chrono::steady_clock::now();
  long long us = std::chrono::duration_cast<std::chrono::microseconds>(stop - start).count();
  std::printf("Num of solutions: %lld\nTime = %lld us\n", count, us);
  return 0;
}
