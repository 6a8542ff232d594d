// Native thread-pool reference for the N-Queens benchmark.
//
// Written for pytfrt from the description of the playground's C++ thread-pool program (spec
// 8.7), with its faults fixed: the task queue is an unbounded std::deque (not a fixed-capacity
// ring buffer that throws "queue is full"), idle workers sleep on a condition variable (no
// busy spinning), and the run ends when the number of queued plus running tasks reaches zero.
//
// Usage: nqueens_thread_pool <n> <threads> <levels>   (n in 1..18, threads >= 1, 0 <= levels <= n)
// A task is a placement of `col` queens; col < levels: push one task per valid extension;
// otherwise count the subtree by plain backtracking.  Prints "Num of solutions: <count>",
// "Num of total tasks = <tasks incl. the root>" and "Time = <microseconds> us".
// Built by `pytfrt bench nqueens` with `g++ -O2 -pthread` into a temporary directory.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

struct Task {
  int col;
  std::vector<int> board;  // rows of columns 0..col-1 (sized n)
};

bool is_valid(const std::vector<int>& board, int col, int row) {
  for (int c = 0; c < col; ++c) {
    int placed = board[c];
    if (placed == row || std::abs(placed - row) == col - c) return false;
  }
  return true;
}

long long solve(int n, int col, std::vector<int>& board) {
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

class Pool {
 public:
  Pool(int n, int levels) : n_(n), levels_(levels) {}

  void push_root() {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Task{0, std::vector<int>(n_, 0)});
    pending_ = 1;
    tasks_ = 1;
  }

  void work() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty() || pending_ == 0; });
        if (queue_.empty()) return;  // every task has finished
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      if (task.col < levels_) {
        std::vector<Task> kids;
        for (int row = 0; row < n_; ++row) {
          if (is_valid(task.board, task.col, row)) {
            Task kid{task.col + 1, task.board};
            kid.board[task.col] = row;
            kids.push_back(std::move(kid));
          }
        }
        std::lock_guard<std::mutex> lock(mu_);
        for (Task& kid : kids) queue_.push_back(std::move(kid));
        tasks_ += static_cast<long long>(kids.size());
        pending_ += static_cast<long long>(kids.size()) - 1;
        cv_.notify_all();
      } else {
        total_.fetch_add(solve(n_, task.col, task.board));
        std::lock_guard<std::mutex> lock(mu_);
        if (--pending_ == 0) cv_.notify_all();
      }
    }
  }

  long long total() const { return total_.load(); }
  long long tasks() const { return tasks_; }

 private:
  int n_;
  int levels_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  long long pending_ = 0;
  long long tasks_ = 0;
  std::atomic<long long> total_{0};
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <n_queens> <n_threads> <n_schedule_levels>\n", argv[0]);
    return 2;
  }
  int n = std::atoi(argv[1]);
  int threads = std::atoi(argv[2]);
  int levels = std::atoi(argv[3]);
  if (n < 1 || n > 18 || threads < 1 || levels < 0 || levels > n) {
    std::fprintf(stderr, "need 1 <= n <= 18, threads >= 1, 0 <= levels <= n\n");
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  Pool pool(n, levels);
  pool.push_root();
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) workers.emplace_back([&pool] { pool.work(); });
  for (std::thread& worker : workers) worker.join();
  auto stop = std::chrono::steady_clock::now();
  long long us = std::chrono::duration_cast<std::chrono::microseconds>(stop - start).count();
  std::printf("Num of solutions: %lld\nNum of total tasks = %lld\nTime = %lld us\n",
              pool.total(), pool.tasks(), us);
  return 0;
}
