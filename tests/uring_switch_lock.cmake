# Read by CTest after the discovered tests: the tests that turn the kernel's FUSE-over-io_uring
# switch on or off run one at a time (they would wait for each other on its lock file anyway),
# so CTest gives the other slots to other tests meanwhile.
set_tests_properties(
  MountUringTest.MountSuitesPassOverIoUring
  MountUringTest.StatsSayWhichTransportServesAndHowManyRequestsEachCarried
  MountUringTest.KillingTheDaemonMidLoadEndsTheCallersAndKeepsWhatWasStored
  MountUringTest.SigtermOrLazyUnmountMidLoadEndTheDaemonAndKeepWhatWasStored
  MountUringTest.DaemonsThatMayNotLeaveSchedIdleServeAsWellWithTheHelper
  MountUringSwitchTest.AskingForIoUringWhereTheKernelHasItOffIsRefusedWithTheFix
  PROPERTIES RESOURCE_LOCK kernel_uring_switch)
