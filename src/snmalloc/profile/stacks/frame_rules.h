#pragma once
// Layer profile/stacks, stage "record": how to step from one x86-64 frame to its
// caller, read from the binaries' DWARF call-frame information (.eh_frame,
// the tables C++ exceptions unwind with, present with or without frame
// pointers).
//
// At one instruction address, a frame's rule says where its canonical frame
// address (CFA: the caller's stack pointer) is, rsp or rbp plus an offset,
// where the return address is saved (CFA - 8), and whether rbp, the only
// other register a CFA may be based on, was saved and where.  The FDE (the
// table entry of the function holding the address) is found by the
// toolchain's unwinder (`_Unwind_Find_FDE`, glibc's `_dl_find_object`
// underneath, no locks); its instructions, after those of its CIE, are run
// up to the address.  Anything else a rule may say (expressions, registers
// copied into others, signal frames, realigned stacks whose CFA is based on
// another register) is reported as unsupported, and the caller unwinds that
// stack with the toolchain's unwinder instead (stack_capture.h).

#include "../core/settings.h"

#include <cstring>

// The toolchain unwinder's FDE lookup (libgcc and LLVM's libunwind export
// it; no public header declares it).
struct snmalloc_dwarf_eh_bases
{
  void* tbase;
  void* dbase;
  void* func;
};
extern "C" const void* _Unwind_Find_FDE(void* pc, snmalloc_dwarf_eh_bases* bases);

namespace snmalloc::profile
{
  struct FrameRule
  {
    enum class Kind : uint8_t
    {
      Step, // the fields below say how to reach the caller
      Outermost, // the return address is undefined: there is no caller
      NoTable, // no FDE covers the address: the walk ends here too
      Unsupported // a rule this reader does not follow
    };
    Kind kind = Kind::Unsupported;
    bool cfa_from_rbp = false;
    bool rbp_saved = false;
    int32_t cfa_offset = 0;
    int32_t rbp_offset = 0; // from the CFA, when rbp_saved
  };

  namespace frame_rules_detail
  {
    // DWARF register numbers of x86-64.
    constexpr uint64_t RBP = 6;
    constexpr uint64_t RSP = 7;
    constexpr uint64_t RETURN_ADDRESS = 16;

    // Bounds-checked reads of one CIE or FDE; a read past the end makes
    // the whole rule unsupported, never a read out of the table.
    class Reader
    {
      const uint8_t* p_;
      const uint8_t* end_;
      bool ok_ = true;

    public:
      Reader(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}

      bool ok() const
      {
        return ok_;
      }
      bool at_end() const
      {
        return !ok_ || p_ >= end_;
      }
      const uint8_t* position() const
      {
        return p_;
      }

      void skip(uint64_t n)
      {
        if (!ok_ || n > uint64_t(end_ - p_))
        {
          ok_ = false;
          return;
        }
        p_ += n;
      }

      template<typename T>
      T fixed()
      {
        T v{};
        if (!ok_ || sizeof(T) > size_t(end_ - p_))
        {
          ok_ = false;
          return v;
        }
        std::memcpy(&v, p_, sizeof(T));
        p_ += sizeof(T);
        return v;
      }

      uint64_t uleb()
      {
        uint64_t v = 0;
        for (unsigned shift = 0; ok_; shift += 7)
        {
          uint8_t b = fixed<uint8_t>();
          if (shift < 64)
            v |= uint64_t(b & 0x7f) << shift;
          if ((b & 0x80) == 0)
            return v;
        }
        return 0;
      }

      int64_t sleb()
      {
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b = 0;
        do
        {
          b = fixed<uint8_t>();
          if (shift < 64)
            v |= uint64_t(b & 0x7f) << shift;
          shift += 7;
        } while (ok_ && (b & 0x80) != 0);
        if (shift < 64 && (b & 0x40) != 0)
          v |= ~uint64_t(0) << shift;
        return int64_t(v);
      }

      // Skips a pointer of DWARF encoding `encoding` (only its size
      // matters: the function's start comes from _Unwind_Find_FDE).
      void skip_encoded(uint8_t encoding)
      {
        switch (encoding & 0x0f)
        {
          case 0x00: // absolute pointer
          case 0x04: // udata8
          case 0x0c: // sdata8
            skip(8);
            return;
          case 0x02: // udata2
          case 0x0a: // sdata2
            skip(2);
            return;
          case 0x03: // udata4
          case 0x0b: // sdata4
            skip(4);
            return;
          case 0x01: // uleb128
          case 0x09: // sleb128
            uleb();
            return;
          default:
            ok_ = false;
        }
      }
    };

    // The part of a row of the unwind table the walk needs.
    struct Row
    {
      enum class Saved : uint8_t
      {
        Same, // the caller's value is this frame's
        AtOffset, // saved at CFA + offset
        Undefined,
        Other // anything else: unsupported if it is needed
      };
      uint64_t cfa_register = RSP;
      int64_t cfa_offset = 8;
      bool cfa_other = false; // a CFA expression
      Saved rbp = Saved::Same;
      int64_t rbp_offset = 0;
      Saved return_address = Saved::AtOffset;
      int64_t return_address_offset = -8;
      bool rsp_rule = false; // rsp given a rule of its own
    };

    struct Program
    {
      uint64_t code_alignment = 1;
      int64_t data_alignment = -8;
      Row initial; // after the CIE's instructions (DW_CFA_restore)
    };

    inline void set_register(Row& row, uint64_t reg, Row::Saved how, int64_t offset)
    {
      if (reg == RBP)
      {
        row.rbp = how;
        row.rbp_offset = offset;
      }
      else if (reg == RETURN_ADDRESS)
      {
        row.return_address = how;
        row.return_address_offset = offset;
      }
      else if (reg == RSP)
        row.rsp_rule = true;
    }

    inline void restore_register(Row& row, const Row& initial, uint64_t reg)
    {
      if (reg == RBP)
      {
        row.rbp = initial.rbp;
        row.rbp_offset = initial.rbp_offset;
      }
      else if (reg == RETURN_ADDRESS)
      {
        row.return_address = initial.return_address;
        row.return_address_offset = initial.return_address_offset;
      }
      else if (reg == RSP)
        row.rsp_rule = initial.rsp_rule;
    }

    // Runs call-frame instructions from `code` on `row` until the location
    // passes `target` (locations start at `location`).  False: an
    // instruction this reader does not know, or a malformed table.
    inline bool run(
      Reader code,
      const Program& program,
      Row& row,
      uintptr_t location,
      uintptr_t target)
    {
      constexpr size_t STATE_DEPTH = 8;
      Row remembered[STATE_DEPTH];
      size_t depth = 0;
      auto advance = [&](uint64_t delta) {
        location += delta * program.code_alignment;
        return location <= target;
      };
      while (!code.at_end())
      {
        uint8_t op = code.fixed<uint8_t>();
        uint8_t low = op & 0x3f;
        switch (op >> 6)
        {
          case 1: // DW_CFA_advance_loc
            if (!advance(low))
              return true;
            continue;
          case 2: // DW_CFA_offset
            set_register(
              row, low, Row::Saved::AtOffset, int64_t(code.uleb()) * program.data_alignment);
            continue;
          case 3: // DW_CFA_restore
            restore_register(row, program.initial, low);
            continue;
          default:
            break;
        }
        switch (op)
        {
          case 0x00: // nop
            break;
          case 0x02: // advance_loc1
            if (!advance(code.fixed<uint8_t>()))
              return code.ok();
            break;
          case 0x03: // advance_loc2
            if (!advance(code.fixed<uint16_t>()))
              return code.ok();
            break;
          case 0x04: // advance_loc4
            if (!advance(code.fixed<uint32_t>()))
              return code.ok();
            break;
          case 0x05: // offset_extended
          {
            uint64_t reg = code.uleb();
            set_register(
              row, reg, Row::Saved::AtOffset, int64_t(code.uleb()) * program.data_alignment);
            break;
          }
          case 0x06: // restore_extended
            restore_register(row, program.initial, code.uleb());
            break;
          case 0x07: // undefined
            set_register(row, code.uleb(), Row::Saved::Undefined, 0);
            break;
          case 0x08: // same_value
            set_register(row, code.uleb(), Row::Saved::Same, 0);
            break;
          case 0x09: // register
          {
            uint64_t reg = code.uleb();
            code.uleb();
            set_register(row, reg, Row::Saved::Other, 0);
            break;
          }
          case 0x0a: // remember_state
            if (depth == STATE_DEPTH)
              return false;
            remembered[depth++] = row;
            break;
          case 0x0b: // restore_state
            if (depth == 0)
              return false;
            row = remembered[--depth];
            break;
          case 0x0c: // def_cfa
            row.cfa_register = code.uleb();
            row.cfa_offset = int64_t(code.uleb());
            row.cfa_other = false;
            break;
          case 0x0d: // def_cfa_register
            row.cfa_register = code.uleb();
            row.cfa_other = false;
            break;
          case 0x0e: // def_cfa_offset
            row.cfa_offset = int64_t(code.uleb());
            break;
          case 0x0f: // def_cfa_expression
            row.cfa_other = true;
            code.skip(code.uleb());
            break;
          case 0x10: // expression
          case 0x16: // val_expression
          {
            uint64_t reg = code.uleb();
            code.skip(code.uleb());
            set_register(row, reg, Row::Saved::Other, 0);
            break;
          }
          case 0x11: // offset_extended_sf
          {
            uint64_t reg = code.uleb();
            set_register(
              row, reg, Row::Saved::AtOffset, code.sleb() * program.data_alignment);
            break;
          }
          case 0x12: // def_cfa_sf
            row.cfa_register = code.uleb();
            row.cfa_offset = code.sleb() * program.data_alignment;
            row.cfa_other = false;
            break;
          case 0x13: // def_cfa_offset_sf
            row.cfa_offset = code.sleb() * program.data_alignment;
            break;
          case 0x14: // val_offset
          {
            uint64_t reg = code.uleb();
            code.uleb();
            set_register(row, reg, Row::Saved::Other, 0);
            break;
          }
          case 0x15: // val_offset_sf
          {
            uint64_t reg = code.uleb();
            code.sleb();
            set_register(row, reg, Row::Saved::Other, 0);
            break;
          }
          case 0x2e: // GNU_args_size: for landing pads only
            code.uleb();
            break;
          case 0x2f: // GNU_negative_offset_extended
          {
            uint64_t reg = code.uleb();
            set_register(
              row, reg, Row::Saved::AtOffset, -int64_t(code.uleb()) * program.data_alignment);
            break;
          }
          default: // set_loc, and anything newer or vendor-specific
            return false;
        }
      }
      return code.ok();
    }

    // A CIE: its alignment factors, the FDE pointer encoding, and the
    // initial row.  False for what this reader does not handle.
    inline bool read_cie(const uint8_t* cie, Program& program, uint8_t& fde_encoding)
    {
      uint32_t length;
      std::memcpy(&length, cie, sizeof(length));
      if (length == 0 || length == 0xffffffff)
        return false;
      Reader r(cie + 4, cie + 4 + length);
      if (r.fixed<uint32_t>() != 0) // a CIE's id is 0 in .eh_frame
        return false;
      uint8_t version = r.fixed<uint8_t>();
      const char* augmentation = reinterpret_cast<const char*>(r.position());
      size_t augmentation_length = ::strnlen(augmentation, size_t(cie + 4 + length - r.position()));
      r.skip(augmentation_length + 1);
      program.code_alignment = r.uleb();
      program.data_alignment = r.sleb();
      uint64_t return_register = version == 1 ? r.fixed<uint8_t>() : r.uleb();
      if (!r.ok() || return_register != RETURN_ADDRESS)
        return false;
      fde_encoding = 0; // absolute pointers unless 'R' says otherwise
      if (augmentation_length > 0)
      {
        if (augmentation[0] != 'z')
          return false;
        uint64_t data_length = r.uleb();
        if (!r.ok() || data_length > uint64_t(cie + 4 + length - r.position()))
          return false;
        Reader data(r.position(), r.position() + data_length);
        r.skip(data_length);
        for (size_t i = 1; i < augmentation_length; i++)
        {
          switch (augmentation[i])
          {
            case 'R':
              fde_encoding = data.fixed<uint8_t>();
              break;
            case 'P':
              data.skip_encoded(data.fixed<uint8_t>());
              break;
            case 'L':
              data.fixed<uint8_t>();
              break;
            default: // 'S' (a signal frame) and anything unknown
              return false;
          }
        }
        if (!data.ok())
          return false;
      }
      if (!r.ok())
        return false;
      Row row;
      if (!run(r, program, row, 0, UINTPTR_MAX))
        return false;
      program.initial = row;
      return true;
    }
  } // namespace frame_rules_detail

  // The rule at `address` (an instruction: for a caller's frame, its
  // return address - 1, which lies in the call instruction).
  inline FrameRule frame_rule_at(uintptr_t address)
  {
    using namespace frame_rules_detail;
    FrameRule rule;
    snmalloc_dwarf_eh_bases bases{};
    const auto* fde = static_cast<const uint8_t*>(
      _Unwind_Find_FDE(reinterpret_cast<void*>(address), &bases));
    if (fde == nullptr)
    {
      rule.kind = FrameRule::Kind::NoTable;
      return rule;
    }
    uint32_t length;
    std::memcpy(&length, fde, sizeof(length));
    if (length == 0 || length == 0xffffffff)
      return rule;
    Reader r(fde + 4, fde + 4 + length);
    const uint8_t* cie_field = r.position();
    uint32_t cie_offset = r.fixed<uint32_t>();
    Program program;
    uint8_t encoding = 0;
    if (!r.ok() || !read_cie(cie_field - cie_offset, program, encoding))
      return rule;
    if (encoding == 0xff) // DW_EH_PE_omit
      return rule;
    r.skip_encoded(encoding); // the function's start: bases.func
    r.skip_encoded(encoding & 0x0f); // its length
    // 'z' augmentations (all of GCC's and Clang's) put a length before the
    // FDE's own augmentation data (the LSDA pointer).
    r.skip(r.uleb());
    if (!r.ok())
      return rule;
    Row row = program.initial;
    if (!run(r, program, row, reinterpret_cast<uintptr_t>(bases.func), address))
      return rule;
    if (row.return_address == Row::Saved::Undefined)
    {
      rule.kind = FrameRule::Kind::Outermost;
      return rule;
    }
    bool based = !row.cfa_other && (row.cfa_register == RSP || row.cfa_register == RBP);
    if (
      !based || row.rsp_rule || row.return_address != Row::Saved::AtOffset ||
      row.return_address_offset != -8 ||
      (row.rbp != Row::Saved::Same && row.rbp != Row::Saved::AtOffset) ||
      row.cfa_offset < 0 || row.cfa_offset > INT32_MAX || row.rbp_offset < INT32_MIN ||
      row.rbp_offset > INT32_MAX)
      return rule;
    rule.kind = FrameRule::Kind::Step;
    rule.cfa_from_rbp = row.cfa_register == RBP;
    rule.cfa_offset = int32_t(row.cfa_offset);
    rule.rbp_saved = row.rbp == Row::Saved::AtOffset;
    rule.rbp_offset = int32_t(row.rbp_offset);
    return rule;
  }
} // namespace snmalloc::profile
