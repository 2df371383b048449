// A writer of Python pickles (protocol 2) made of plain types only — dict,
// list, tuple, str, int, float, bool, None — so any Python unpickles them
// without importing anything (pickle.load needs no class). Used for
// torch.cuda.memory._snapshot()-shaped files (viz/memory_snapshot.cc).
//
// Usage: a value is written as it is built, in order:
//   PickleWriter p;
//   p.BeginDict();
//   p.Str("size"); p.Int(4096);
//   p.Str("frames"); p.BeginList(); p.EndList();
//   p.EndDict();
//   std::string bytes = p.Finish();
// Opcodes from CPython Lib/pickletools.py (PROTO, EMPTY_DICT, MARK, SETITEMS,
// EMPTY_LIST, APPENDS, TUPLE, BININT, LONG1, BINUNICODE, BINFLOAT, NEWTRUE,
// NEWFALSE, NONE, STOP); no memo, so nothing is shared.
#ifndef GPUSIM_VIZ_PICKLE_H_
#define GPUSIM_VIZ_PICKLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpusim {

class PickleWriter {
 public:
  PickleWriter();
  void BeginDict();  // then key, value, key, value, ...
  void EndDict();
  void BeginList();
  void EndList();
  void BeginTuple();
  void EndTuple();
  void Str(std::string_view s);  // REQUIRES: UTF-8
  void Int(int64_t v);
  void Float(double v);
  void Bool(bool v);
  void None();
  // REQUIRES: every Begin matched by its End. Ends the pickle (STOP).
  std::string Finish();

 private:
  enum class Open { kDict, kList, kTuple };
  void Mark();
  std::string out_;
  std::vector<Open> open_;
};

}  // namespace gpusim

#endif  // GPUSIM_VIZ_PICKLE_H_
