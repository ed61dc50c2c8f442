# The e2e tests that run alone (RUN_SERIAL); ctest runs the others TEST_JOBS at a time beside
# each other (scripts/test), never beside one of these. A test is here when it
#   (a) judges timing or throughput against a bound another test's CPU use could break
#       (verify, busbw, RTT, detection/outage/stall, a tight timeout),
#   (b) acts on or observes the whole host (clean --all; Chromium's pictures), or
#   (c) loads both cores for long (16 ranks, a busy loop on every CPU).
# The rest check behaviour (exit codes, messages, files, JSON, reachability with generous
# bounds) on labs named per process (e2e_util.h unique_lab: prefix + pid digits). A new e2e
# test that measures anything belongs here; docs/development.md "What each tier costs".
set(TB_E2E_SERIAL_TESTS
  Bench.KillingOneRankFailsTheOthersClearlyAndTheLabStaysHealthy  # a: others fail within 10 s
  Bench.KillingOneRankOverSharedMemoryFailsTheOthersFast  # a: the same bound
  BenchHz.*  # a, b, c: 16 ranks, a 2 s timeout over the WAN, Chromium
  Congestion.*  # a: rail drops, retransmits and goodput of an incast; the agent's timing; the
               # PFC watchdog's detection of a pfc-storm (200 ms ± 10%)
  ExerciseTest.WrongNicTwoStudentsHintsResetStop  # a: busbw 0.9 of the rail
  ExerciseTest.UntunedCollectives  # a: busbw
  ExerciseTest.EcmpPolarisation  # a: busbw, uplink balance
  ExerciseTest.DualTor  # a: stall bound
  ExerciseTest.GrayFailure  # a: detection and recovery bounds
  ExerciseTest.CheckpointFloodsWan  # a: gold p99, checkpoint on time
  ExerciseTest.WrongNicPause  # a: control probes' p99
  Fault.LinkDownTakesTheLinkAndItsRoutesAndForBringsThemBack  # a: revert time, 100 ms slack
  Fault.FlapCyclesDownAndUp  # a: cycle gaps, 100 ms slack
  Fault.LossAndLatencyChangeTheLinkAndGoBack  # a: RTT window
  Lab.CleanAllTakesEachLabsLockAndLeavesABusyLabAlone  # b: clean --all
  Lab.UpRacingCleanAllEndsWholeOrGoneNeverHalfBuilt  # b: clean --all
  Lab.DelayStagesStartWhileTheRestOfTheLabIsBuilt  # a: the stages' start before the build's end
  LaunchHz.*  # c: 16 torch ranks
  Rootless.*  # b: makes a system account; compares the root namespace's links before and after
  MultihostBench.VerifyOnBothHostsMeasuresEveryClassTheWanAcrossTheTunnel  # a: verify
  MultihostFault.*  # a: RTT medians, loss counts
  MultihostHzBj.HzServersSplitOverAThirdHostReachEveryGpu  # a: verify --quick
  MultihostRun.*  # a: detection/recovery/stall expectations, replication through failover
  QosCheckpoint.*  # a, b, c: RTT percentiles and goodput ratios on hz-bj, Chromium
  Report.*  # b: Chromium
  Run.*  # a: detection, outage and stall bounds
  RunCommand.*  # a, c: 4 torch ranks against a fixed timeline
  Seal.*  # a: answers within 3 s, the whole test within 30 s
  ShapedLab.*  # a: RTT bounds, a stage restart seen within about 1 s
  Train.TheGuardFlagsACpuBoundRun  # c: a busy loop on every CPU
  TrainHz.*  # c: 16 ranks
  Verify.*  # a: verify must pass
  VerifyPaths.*  # a: verify verdicts; b: Chromium; c: load on every link
  Watch.UnderTmuxTheBusiestLinkIsOnTopAndQAndCtrlCQuit  # a, b: Chromium, quits within 5 s
)
