// HloModule: the structure of an XLA HLO module as its text format prints it
// (`jax.jit(f).lower(...).as_text(dialect="hlo")`, or a compiled module's
// `as_text()`): computations of instructions in SSA form, each with its
// result shape, opcode, operands, called computations and attributes, plus
// the module's input/output aliasing and buffer donors. Attribute values are
// kept as their text; the importer (hlo_to_program.h) reads the few it needs.
// Produced by ParseHloModule (hlo_parser.h).
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_MODULE_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_MODULE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpusim {

// An array shape (`f32[2,1024]{1,0}`) or a tuple of shapes (`(s32[], f32[])`).
// `element` is the HLO primitive type name ("f32", "bf16", "s32", "pred",
// "token", ...). The layout's text is kept as printed (`1,0`, `2,1,0:T(8,128)`):
// sizes do not depend on it, but whether two buffers may be one does
// (ShapeUtil::Equal compares layouts); `S(5)` in it marks pinned host memory.
struct HloShape {
  bool tuple = false;
  std::string element;
  std::vector<int64_t> dims;
  std::vector<HloShape> elements;  // tuple elements
  int memory_space = 0;
  std::string layout;  // inside the braces; "" when none is printed

  int64_t ElementCount() const;
  // Bytes of an array (0 for a tuple or token); -1 for a type of unknown size.
  int64_t ArrayBytes() const;
  std::string ToString() const;
};

// Where an element of the text came from, for errors ("FILE:LINE:COL").
struct HloLocation {
  int line = 0;
  int column = 0;
};

struct HloInstruction {
  std::string name;
  HloShape shape;
  std::string opcode;
  std::vector<int> operands;        // indices into the computation's instructions
  std::vector<std::string> operand_names;
  std::string literal;              // constant: the literal text inside the parentheses
  int64_t parameter_number = -1;    // parameter: its number
  // Called computations by attribute: to_apply, body, condition, calls,
  // branch_computations (several), true_computation, false_computation.
  std::map<std::string, std::vector<std::string>> called;
  std::map<std::string, std::string> attributes;  // every other attribute, raw text
  bool root = false;
  HloLocation location;

  // The raw text of attribute `key`, or "" when absent.
  const std::string& attr(const std::string& key) const;
};

struct HloComputation {
  std::string name;
  bool entry = false;
  std::vector<HloInstruction> instructions;  // in text order (operands first)
  int root = -1;
  std::vector<int> parameters;  // instruction index of parameter(i), by i
  HloLocation location;
};

// One `input_output_alias` entry: output {output_index} is written into
// parameter `parameter` (at {parameter_index}, empty for a whole array).
struct HloAlias {
  std::vector<int64_t> output_index;
  int64_t parameter = 0;
  std::vector<int64_t> parameter_index;
  bool must_alias = false;
};

struct HloModule {
  std::string name;
  std::string file;  // for errors
  std::vector<HloComputation> computations;
  int entry = -1;
  std::vector<HloAlias> aliases;
  std::vector<int64_t> buffer_donors;  // parameters in `buffer_donor`
  int64_t num_partitions = 1;
  int64_t replica_count = 1;
  // `is_scheduled=true`: a compiled module (`compiled.as_text()`, an
  // after-optimizations dump): each computation's instructions are printed
  // in its schedule, fusions are XLA's own (hlo_buffer_assignment.h).
  bool is_scheduled = false;
  std::map<std::string, int> by_name;  // computation name -> index

  // REQUIRES: the computation exists (the parser checks every reference).
  const HloComputation& computation(const std::string& name) const {
    return computations[static_cast<size_t>(by_name.at(name))];
  }
  const HloComputation& entry_computation() const { return computations[static_cast<size_t>(entry)]; }
  size_t InstructionCount() const;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_MODULE_H_
