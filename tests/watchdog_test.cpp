// The failure watchdog's judgement (comm/watchdog.h) apart from threads and files: heartbeat
// lines, a silent peer, a dead process, a finished peer, a peer naming the rank it found failed.
// The whole watchdog under real launchers: tests/rank_failure_test.sh.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "meshflow/comm/watchdog.h"

namespace mf::comm {
namespace {

Heartbeat beat_of(int64_t pid, int64_t beat, int64_t step = 3, const std::string& host = "h") {
  Heartbeat h;
  h.pid = pid;
  h.beat = beat;
  h.step = step;
  h.host = host;
  h.state = "waiting in all_reduce(sum) f32(8,) on rank 1 of group [0, 1] (mpi)";
  return h;
}

bool always_alive(int64_t) { return true; }
bool never_alive(int64_t) { return false; }

TEST(Watchdog, HeartbeatLinesRoundTripAndTornOnesAreRejected) {
  Heartbeat h = beat_of(1234, 7, 42);
  h.blame = 2;
  const std::string line = format_heartbeat(h);
  EXPECT_EQ(line.size(), 512u);
  const auto back = parse_heartbeat(line);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->pid, 1234);
  EXPECT_EQ(back->beat, 7);
  EXPECT_EQ(back->step, 42);
  EXPECT_EQ(back->blame, 2);
  EXPECT_FALSE(back->finished);
  EXPECT_EQ(back->host, "h");
  EXPECT_EQ(back->state, h.state);
  EXPECT_FALSE(parse_heartbeat(line.substr(0, 100)).has_value());          // half written
  EXPECT_FALSE(parse_heartbeat("x" + line.substr(1)).has_value());         // not a heartbeat
  EXPECT_FALSE(parse_heartbeat(std::string(512, '\0')).has_value());       // a file of zeros
  Heartbeat nl = h;
  nl.state = "two\nlines";
  EXPECT_EQ(parse_heartbeat(format_heartbeat(nl))->state, "two lines");  // one line, always
}

TEST(Watchdog, ASilentPeerFailsAfterTheStaleTimeOnly) {
  PeerMonitor m(0, 3, "h", 5.0);
  m.observe(1, beat_of(11, 1), 0.0);
  m.observe(2, beat_of(12, 1), 0.0);
  std::string why;
  EXPECT_EQ(m.failed(4.0, &why, &always_alive), -1);
  m.observe(1, beat_of(11, 2), 4.0);  // rank 1 beats on, rank 2 does not
  m.observe(2, beat_of(12, 1), 4.0);
  EXPECT_EQ(m.failed(5.5, &why, &always_alive), 2);
  EXPECT_NE(why.find("rank 2 (pid 12 on h) stopped responding: no heartbeat for 5.5 s"), std::string::npos) << why;
  EXPECT_NE(why.find("at step 3"), std::string::npos) << why;
  // This rank's own loop was held up: the silence measured that, not the peer.
  m.restart_clocks(5.5);
  EXPECT_EQ(m.failed(6.0, &why, &always_alive), -1);
}

TEST(Watchdog, ADeadProcessOnThisHostFailsAtOnceAndOnlyThere) {
  PeerMonitor m(1, 3, "h", 100.0);
  m.observe(0, beat_of(10, 1, 3, "other-host"), 0.0);
  m.observe(2, beat_of(12, 1), 0.0);
  std::string why;
  EXPECT_EQ(m.failed(0.1, &why, &never_alive), 2);  // rank 0's pid means nothing on this host
  EXPECT_NE(why.find("rank 2 (pid 12 on h) died"), std::string::npos) << why;
  PeerMonitor remote(1, 2, "h", 100.0);
  remote.observe(0, beat_of(10, 1, 3, "other-host"), 0.0);
  EXPECT_EQ(remote.failed(0.1, &why, &never_alive), -1);
}

TEST(Watchdog, AFinishedPeerIsNeverJudgedAndANeverSeenOneWaitsForTheTimeout) {
  PeerMonitor m(0, 3, "h", 5.0);
  Heartbeat done = beat_of(11, 9);
  done.finished = true;
  m.observe(1, done, 0.0);
  m.observe(2, std::nullopt, 0.0);  // never readable (a host that does not share the folder)
  EXPECT_EQ(m.failed(1000.0, nullptr, &never_alive), -1);
}

TEST(Watchdog, APeerEndingBecauseOfAFailedRankMakesEveryoneNameThatRank) {
  PeerMonitor m(0, 4, "h", 5.0);
  Heartbeat ending = beat_of(11, 4);
  ending.blame = 3;
  ending.state = "rank 3 (pid 13 on h) stopped responding: no heartbeat for 5.0 s";
  m.observe(1, ending, 0.0);  // rank 1 found rank 3 silent and left first
  m.observe(3, beat_of(13, 2), 0.0);
  std::string why;
  EXPECT_EQ(m.failed(0.5, &why, &never_alive), 3);  // not rank 1, whose process is gone too
  EXPECT_NE(why.find("rank 3 (pid 13 on h) stopped responding"), std::string::npos) << why;
  EXPECT_NE(why.find("(found by rank 1)"), std::string::npos) << why;
}

TEST(Watchdog, TheFirstToFindAFailureWaitsUntilEverySurvivorHasNamedItToo) {
  // Rank 0 found rank 2 silent; ranks 1, 3, 4 and 5 still run. It may end (and a launcher like
  // mpirun then ends the job) only once each of them has said so itself or cannot.
  PeerMonitor m(0, 6, "h", 5.0);
  for (int r = 1; r < 6; ++r) m.observe(r, beat_of(10 + r, 1), 0.0);
  m.observe(4, beat_of(14, 1, 3, "other-host"), 0.0);
  EXPECT_FALSE(m.all_told(2, 0.5, &always_alive));
  Heartbeat named = beat_of(11, 2);
  named.blame = 2;
  m.observe(1, named, 0.5);  // rank 1 has named it
  Heartbeat done = beat_of(13, 2);
  done.finished = true;
  m.observe(3, done, 0.5);   // rank 3 had finished
  EXPECT_FALSE(m.all_told(2, 0.6, &always_alive));  // ranks 4 and 5 run on, silent about it
  EXPECT_FALSE(m.all_told(2, 0.6, &never_alive));   // rank 4 on another host: its pid means nothing
  Heartbeat named4 = beat_of(14, 2, 3, "other-host");
  named4.blame = 2;
  m.observe(4, named4, 0.7);
  EXPECT_FALSE(m.all_told(2, 0.8, &always_alive));
  EXPECT_TRUE(m.all_told(2, 0.8, &never_alive));    // rank 5 (this host) died meanwhile
  EXPECT_TRUE(m.all_told(2, 5.5, &always_alive));   // or went silent itself
  EXPECT_FALSE(m.all_told(5, 0.8, &always_alive));  // had rank 5 failed: rank 2 runs on, silent
}

TEST(Watchdog, ProcessAliveSeesRunningExitedAndZombieProcesses) {
  EXPECT_TRUE(process_alive(::getpid()));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Not yet reaped: a zombie is not alive.
  for (int i = 0; i < 200 && process_alive(child); ++i) ::usleep(10000);
  EXPECT_FALSE(process_alive(child));
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(process_alive(child));
  EXPECT_FALSE(process_alive(0));
}

TEST(Watchdog, WaitNotesNestAndStepsArePublished) {
  EXPECT_EQ(current_wait(), "");
  {
    WaitNote outer("barrier on rank 0 of group [0, 1] (mpi)");
    {
      WaitNote inner("all_reduce(sum) f32(8,) on rank 0 of group [0, 1] (mpi)");
      EXPECT_EQ(current_wait(), "waiting in all_reduce(sum) f32(8,) on rank 0 of group [0, 1] (mpi)");
    }
    EXPECT_EQ(current_wait(), "waiting in barrier on rank 0 of group [0, 1] (mpi)");
  }
  EXPECT_EQ(current_wait(), "");
  note_step(17);
  EXPECT_EQ(current_step(), 17);
  note_step(0);
}

}  // namespace
}  // namespace mf::comm
