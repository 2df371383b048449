# Folders of the simulator and what each may depend on (DESIGN.md's map):
# one library target per folder (gpusim_<folder>, '/' as '_'), linked to
# exactly these; tools/check_layering.cmake fails the build on any include
# outside them. Add a folder here when you add one.
set(GPUSIM_FOLDERS
  sim/base sim/ir sim/trace sim/config sim/remat sim/device sim/alloc sim/lower
  sim/engine sim/import models sim/step sim/advise sim/replay sim/calibrate
  sim/report viz)
set(GPUSIM_DEPS_sim/base "")
set(GPUSIM_DEPS_sim/ir sim/base)
set(GPUSIM_DEPS_sim/trace sim/base sim/ir)
set(GPUSIM_DEPS_sim/config sim/base sim/ir)
set(GPUSIM_DEPS_sim/remat sim/base sim/config sim/ir)
set(GPUSIM_DEPS_sim/device sim/base sim/config sim/ir sim/trace)
set(GPUSIM_DEPS_sim/alloc sim/base sim/config sim/trace)
# sim/lower/xla reads the compiler options of the run (XlaSpec, issue 12).
set(GPUSIM_DEPS_sim/lower sim/base sim/config sim/ir sim/trace)
set(GPUSIM_DEPS_sim/engine sim/alloc sim/base sim/config sim/device sim/ir sim/trace)
# The HLO importer (sim/import/hlo, issue 16) is a front-end: it reads its
# run settings (sim/config) and decides what materialises with XLA's fusion
# rules (sim/lower/xla/fusion). A debt: the fusion decision belongs to the
# XLA lowering, applied to the imported IR (issue 11 step 6).
set(GPUSIM_DEPS_sim/import sim/alloc sim/base sim/ir sim/trace sim/config sim/lower)
# models/ emits layer graphs and Program IR and reads the remat plan the
# step pipeline decides on them (sim/remat/apply.h), never a policy; what
# its annotations become (loop slices, the entry result tuple) is
# sim/lower/xla's, applied by the pipeline: models/ includes neither
# sim/remat nor sim/import, and of sim/lower only semantics.h, the named
# facts of the run's framework (Note [Framework semantics]) it emits by.
set(GPUSIM_DEPS_models sim/base sim/config sim/ir sim/lower sim/trace)
# sim/step runs the pipeline; its family registry (sim/step/families.h)
# adds the importer-backed front-ends (sim/import/hlo) to models/'s.
set(GPUSIM_DEPS_sim/step models sim/alloc sim/base sim/config sim/device sim/engine sim/import sim/ir sim/lower sim/remat sim/trace)
set(GPUSIM_DEPS_sim/advise sim/base sim/config sim/remat sim/step sim/ir sim/lower sim/engine sim/trace sim/device)
set(GPUSIM_DEPS_sim/replay sim/alloc sim/base sim/config sim/import sim/trace sim/ir)
set(GPUSIM_DEPS_sim/calibrate sim/alloc sim/base sim/config sim/device sim/engine sim/import sim/step sim/trace sim/ir sim/lower)
set(GPUSIM_DEPS_sim/report sim/advise sim/base sim/config sim/device sim/engine sim/ir sim/lower sim/step sim/trace)
set(GPUSIM_DEPS_viz sim/alloc sim/base sim/config sim/engine sim/import sim/ir sim/lower sim/report sim/step sim/trace)
# Known exceptions to "only sim/X includes sim/X/impl/" (FILE:HEADER), each
# a debt. None now: sim/replay restores and queries segments through the
# Allocator interface (sim/alloc/allocator.h, ModelsSegments).
set(GPUSIM_IMPL_EXCEPTIONS "")
