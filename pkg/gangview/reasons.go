package gangview

// The reasons of the events muster records about a gang. The programs
// that record them and whoever reads a gang back from its events name
// them here, once.
const (
	// On a PodGroup, from muster-controller.
	ReasonWaitingForMembers = "WaitingForMembers"
	ReasonElasticGrown      = "ElasticGrown"
	// On a member taken from an elastic group, from muster-controller.
	ReasonElasticShrunk = "ElasticShrunk"

	// On a PodGroup, from muster-scheduler.
	ReasonGangAdmitted           = "GangAdmitted"
	ReasonGangRejected           = "GangRejected"
	ReasonGangEvicted            = "GangEvicted"
	ReasonPreempting             = "Preempting"
	ReasonPreempted              = "Preempted"
	ReasonLateMemberMissing      = "LateMemberMissing"
	ReasonLateMemberRoomReleased = "LateMemberRoomReleased"

	// On a member held for its predecessors, from muster-scheduler.
	ReasonLaunchHeld         = "LaunchHeld"
	ReasonLaunchReleased     = "LaunchReleased"
	ReasonLaunchHoldTimedOut = "LaunchHoldTimedOut"
)
