/* rig-agent: the agent as a program of its own (`rig agent` is the same). */
#include "agent/agent.h"

int main(int argc, char **argv)
{
    return agent_main(argc, argv);
}
