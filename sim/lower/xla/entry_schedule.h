// The entry schedule of an XLA program: XLA's three memory schedulers over
// the entry computation, the lowest peak kept, then the post-scheduling copy
// elision that decides which value holds each donated allocation.
//
// Note [Entry schedule]
// On GPU every computation is scheduled by DefaultMemoryScheduler
// (openxla/xla a91d9c30, xla/hlo/transforms/simplifiers/
// hlo_memory_scheduler.cc:626, through ComputationSchedulerToModuleScheduler
// in xla/service/gpu/gpu_hlo_schedule.cc:649): it builds the List
// (ListScheduler, line 86), DFS (DFSMemoryScheduler, line 409) and
// post-order (PostOrderMemoryScheduler, line 607) sequences, heap-simulates
// each with NoFragmentationStatsHeap and keeps the lowest peak, ties going
// to List, then DFS (line 666). At a91d9c30 that peak was the entry's alone
// (MinimumMemoryForComputation; AccountForSubcomputationMemory starts from
// 0); since openxla/xla 1c7545f1 DefaultMemoryScheduler schedules the module
// and compares whole-module peaks (MinimumMemoryForModule), in which a while
// body's values count while the loop runs: gpusim adds each loop body's own
// peak at its while (Note [Loop bodies in the schedule's peak] in the .cc).
//  - List: repeatedly schedules the ready instruction of highest priority
//    (bytes freed − bytes defined, then user count; effective scalars first;
//    parameters' and constants' buffers ignored; among equals the one made
//    ready last: multimap order, `--ready_queue.end()`), lines 188-230.
//  - DFS: a post-order that visits operands by cumulative extra users, then
//    cumulative defined bytes (both summed over all predecessors), then name.
//  - Post-order: HloComputation::MakeInstructionPostOrder — a DFS from each
//    instruction without users, first operand first, control predecessors
//    before operands (hlo_computation.cc:624-690).
// gpusim schedules its entry-level ops and moves each rolled loop
// (Region::while_loop) as one instruction whose body keeps its order. Values
// are HLO buffers: a donated parameter and the output aliased to it are one
// buffer live the whole step (HloAliasAnalysis joins input_output_alias
// pairs), and the values aliasing that parameter through a loop (its state
// and result) are one buffer, as the copies copy insertion put before
// scheduling keep them apart (CopyInsertion runs with a
// DependencyHloOrdering then).
//
// Note [Donated allocation]
// After scheduling, RunPostSchedulingCopyInsertion (xla/service/gpu/
// gpu_compiler.cc:1857) calls CopyInsertion::RemoveUnnecessaryCopies
// (copy_insertion.cc:2391) with a SequentialHloOrdering of that schedule:
// a value can live in the donated parameter's allocation only when it is
// written after every earlier value there is dead. When the schedule writes
// a value of the chain early (a zero-initialised cotangent broadcast the List
// scheduler placed before the forward loop that still reads the parameter),
// that value and its loop successors keep a buffer of their own and the
// root copy into the donated output stays. The parameter's allocation is
// then idle between its last reader and that copy, and buffer assignment
// places temps there: an aliased parameter's allocation is reusable
// (BufferAssigner::AssignSingleHloBuffer pushes it onto the reusable
// allocations, buffer_assignment.cc:1500-1503, and tries them for every
// later buffer, lines 1546-1557, through MaybeAssignBuffer's size and
// live-range checks, lines 1347-1420); buffers are tried largest first.
#ifndef GPUSIM_SIM_LOWER_XLA_ENTRY_SCHEDULE_H_
#define GPUSIM_SIM_LOWER_XLA_ENTRY_SCHEDULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/ir/program.h"

namespace gpusim {

struct EntrySchedule {
  // The three schedulers' heap-simulated peaks of the entry computation.
  Bytes list_peak, dfs_peak, post_order_peak;
  std::string chosen;  // "list", "dfs" or "post-order"
  int64_t units = 0;   // entry instructions scheduled (a while counts once)
  // What the copy elision decided, in words, one line per donated
  // allocation whose holder changed from the program order's.
  std::vector<std::string> decisions;

  // "entry schedule: list (peak ...), dfs (...), post-order (...); chose list"
  std::string Describe() const;
};

// Reorders `p` to XLA's entry schedule (Note [Entry schedule]) and applies
// the copy elision for donated parameters (Note [Donated allocation]): may
// clear `aliases` on a chain that cannot share its donated buffer, add the
// root copy into the donated output, and place temps in the idle window of a
// donated allocation (`aliases` set to that parameter).
// REQUIRES: p's ops in a valid order (each tensor produced before it is read).
absl::StatusOr<EntrySchedule> ScheduleEntry(Program& p);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_XLA_ENTRY_SCHEDULE_H_
