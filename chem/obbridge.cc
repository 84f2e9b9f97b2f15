// obbridge.cc — the Open Babel 3.1.1 bridge (see obbridge.h and
// shared/notes/openbabel.md). The only C++ in se3screen: everything here is
// reached through extern "C" functions that catch every exception.
//
// One record's text goes in through ReadString; the molecule is checked
// (parse messages, atom count) before canonical SMILES, InChIKey and 3D
// generation, which crash or hang on huge inputs. 3D generation is
// OBBuilder + MMFF94 (UFF fallback) with rand() seeded per molecule, because
// the gen3D op's fast modes lose their result and Open Babel has no seed API.
//
// OpenMP: Open Babel's force fields run `omp parallel for` loops that are
// slower on several threads than on one (shared/notes/openbabel.md §5: 15
// against 0.85-5.2 mol/s). Every entry point therefore runs Open Babel on one
// thread and puts the caller's thread count back before it returns
// (OneOmpThread): the main process reaches Open Babel too (scaffold split,
// hits.sdf), and its model must keep every thread.
extern "C" {
#include "chem/obbridge.h"
#include "chem/records.h"
#include "common/error.h"
}
#include "chem/etkdg.h"
#include "chem/conformers_ob.h"
#include "chem/gen3d.h"
#include "chem/inbound_ob.h"
#include "chem/ionise.h"
#include "chem/stereo_ob.h"

#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "chem/ob_headers.h"

using namespace OpenBabel;

namespace {

const int DEFAULT_MAX_ATOMS = 999;

bool g_ready = false;
std::ostringstream *g_sink; // where Open Babel would print its messages
OBConversion *g_in, *g_can, *g_ikey, *g_sdf;
std::string g_in_format;

// One OpenMP thread for Open Babel while it lives; the caller's count after.
struct OneOmpThread {
  int saved;
  OneOmpThread() : saved(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOmpThread() { omp_set_num_threads(saved); }
  OneOmpThread(const OneOmpThread &) = delete;
  OneOmpThread &operator=(const OneOmpThread &) = delete;
};

// A rejection: one fixed text per kind, the atom it concerns (1-based, 0:
// none) and the specifics.
void put_reason(mol_why *why, const char *reason, int atom = 0, const std::string &detail = std::string()) {
  mol_why_set(why, atom, reason, "%s", detail.c_str());
}

std::string trim(const std::string &s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace((unsigned char)s[b]))
    b++;
  while (e > b && std::isspace((unsigned char)s[e - 1]))
    e--;
  return s.substr(b, e - b);
}

// A logged message without its "=====" and "*** Open Babel Warning in X"
// lines, the remaining lines joined by spaces.
std::string message_text(const std::string &m) {
  std::istringstream is(m);
  std::string line, out;
  while (std::getline(is, line)) {
    std::string t = trim(line);
    if (t.empty() || t.compare(0, 5, "=====") == 0 || t.compare(0, 14, "*** Open Babel") == 0) continue;
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

// Errors first, then warnings.
std::vector<std::string> logged_messages() {
  std::vector<std::string> out;
  for (obMessageLevel lv : {obError, obWarning})
    for (const std::string &m : obErrorLog.GetMessagesOfLevel(lv)) {
      std::string t = message_text(m);
      if (!t.empty()) out.push_back(t);
    }
  return out;
}

bool contains_nocase(const std::string &hay, const char *needle) {
  std::string h = hay;
  for (char &c : h)
    c = (char)std::tolower((unsigned char)c);
  return h.find(needle) != std::string::npos;
}

void clear_log() {
  obErrorLog.ClearLog();
  if (g_sink) {
    g_sink->str(std::string());
    g_sink->clear();
  }
}

char *dup_c(const std::string &s) {
  char *d = (char *)std::malloc(s.size() + 1);
  if (d) std::memcpy(d, s.c_str(), s.size() + 1);
  return d;
}

unsigned hash_text(const char *p, size_t n) { // FNV-1a
  unsigned h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)p[i]) * 16777619u;
  return h;
}

// ---- chemistry on the way in -------------------------------------------------

// One molecule, one shape (issue 54): a shape to be generated is built from
// the molecule's graph alone, whatever file it came from: the molecule is
// read again from its canonical SMILES (the stereo its file gave, perceived
// from its coordinates where it had them, written into it), so a record of
// MOL2, SDF or SMILES goes into the builder as the same atoms in the same
// order, with the same seed (ob_parse), and comes out with the same shape.
// Hydrogens are then the builder's to place, as for a SMILES: with
// add_hydrogens false a file's own hydrogens stay, and so does the molecule
// as read. false (mol as it was) when the SMILES does not read back as the
// same heavy atoms.
bool graph_only(OBMol &mol, const std::string &smiles, const ob_parse_opts *o) {
  static OBConversion *conv;
  if (!o->add_hydrogens) return false;
  if (!conv) {
    conv = new OBConversion;
    if (!conv->SetInFormat("smi")) return false;
  }
  OBMol fresh;
  if (!conv->ReadString(&fresh, smiles) || fresh.NumHvyAtoms() != mol.NumHvyAtoms()) return false;
  mol = fresh;
  return true;
}

// What parse learns of a record on the way and hands to copy_out: its
// names, the shape made and the other conformers.
struct parsed {
  long n_atoms = 0; // with the hydrogens add_hydrogens will add
  int dim = 0;
  std::string smiles, ikey, formula, title;
  int charge = 0;
  std::vector<std::pair<std::string, std::string>> tags;
  int made3d = 0;
  std::vector<double> more; // the other conformers' coordinates
  int n_more = 0;
  int shape = MOL_SHAPE_AS_MADE;
  int free_tetra = 0, free_cistrans = 0; // stereo the input left open, which the shape fixes
  std::string isomer;
};

// The record's text refused before Open Babel reads it (1), or the reader
// set to its format (0).
int refuse_text(const char *text, size_t len, const ob_parse_opts *o, mol_why *why) {
  if (!o || !o->format || !text) {
    put_reason(why, "internal error", 0, "no text or format");
    return 1;
  }
  size_t max_bytes = o->max_record_bytes ? o->max_record_bytes : REC_MAX_RECORD_DEFAULT;
  if (len > max_bytes) {
    put_reason(why, "record too large", 0, std::to_string(len) + " > " + std::to_string(max_bytes) + " bytes");
    return 1;
  }
  // Open Babel's readers take the text as a C string in places (the SMILES
  // parser does): a NUL byte would end the record there and `CC\0O` would
  // come out as ethane. The record reader refuses such records already; this
  // is the same rule for any other caller.
  if (const char *z = (const char *)std::memchr(text, 0, len)) {
    size_t line = 1, col = 1;
    for (const char *c = text; c < z; c++)
      *c == '\n' ? (line++, col = 1) : col++;
    put_reason(why, "NUL byte in the record", 0,
               "line " + std::to_string(line) + " column " + std::to_string(col) + " of the record");
    return 1;
  }
  if (g_in_format != o->format) {
    if (!g_in->SetInFormat(o->format)) {
      g_in_format.clear();
      put_reason(why, "unknown Open Babel format", 0, std::string("'") + o->format + "'");
      return 1;
    }
    g_in_format = o->format;
  }
  return 0;
}

// The record read into mol (its name into out->name, for a reject row) and
// held to the limits on atoms and charges: 0, or 1 refused.
int read_record(const char *text, size_t len, const ob_parse_opts *o, OBMol &mol, struct mol *out, parsed &p,
                mol_why *why) {
  int max_atoms = o->max_atoms > 0 ? o->max_atoms : DEFAULT_MAX_ATOMS;
  clear_log();
  bool ok = g_in->ReadString(&mol, std::string(text, len));
  std::vector<std::string> msgs = logged_messages();
  // the record's name, for its reject row should one of the checks below
  // refuse it (a failed kekulization is refused with the molecule read)
  std::string title = trim(mol.GetTitle());
  if (!title.empty()) out->name = dup_c(title);
  if (!ok) {
    put_reason(why, "parse failed", 0, msgs.empty() ? "no message" : msgs[0]);
    return 1;
  }
  if (mol.NumAtoms() == 0) {
    put_reason(why, "no atoms");
    return 1;
  }
  for (const std::string &m : msgs)
    if (contains_nocase(m, "kekulize")) {
      put_reason(why, "kekulization failed", 0, m);
      return 1;
    }
  long n_atoms = (long)mol.NumAtoms();
  if (o->add_hydrogens) FOR_ATOMS_OF_MOL(a, mol) n_atoms += a->GetImplicitHCount();
  if (n_atoms > max_atoms) {
    put_reason(why, "too many atoms", 0, std::to_string(n_atoms) + " > " + std::to_string(max_atoms));
    return 1;
  }
  FOR_ATOMS_OF_MOL(a, mol) {
    if (a->GetAtomicNum() == 0) {
      put_reason(why, "dummy atom", (int)a->GetIdx(), "atom " + std::to_string(a->GetIdx()));
      return 1;
    }
    int q = a->GetFormalCharge();
    if (q < -127 || q > 127) {
      put_reason(why, "formal charge out of range", (int)a->GetIdx(),
                 std::to_string(q) + " on atom " + std::to_string(a->GetIdx()));
      return 1;
    }
  }
  p.n_atoms = n_atoms;
  return 0;
}

// The policies of stages.ingest: standardised, one fragment kept (or the
// record refused), protonated, radicals refused. 0, or 1 refused.
int standardise(const char *text, size_t len, const ob_parse_opts *o, OBMol &mol, mol_why *why) {
  if (std::strcmp(o->format, "mol2") == 0) se3_mol2_formal_charges(mol, text, len);
  if (o->standardize == OB_STD_BASIC) se3_standardize(mol);
  if (o->fragments != OB_FRAG_KEEP) {
    std::vector<std::vector<int>> frags = se3_fragments(mol);
    if (frags.size() > 1) {
      if (o->fragments == OB_FRAG_REJECT) {
        put_reason(why, "several fragments", 0,
                   std::to_string(frags.size()) + " fragments (stages.ingest.fragments: reject)");
        return 1;
      }
      se3_keep_largest_fragment(mol, frags);
    }
  }
  // our tables (chem/ionise.h), not Open Babel's neutralize op or pH model
  if (o->protonate == OB_PROT_NEUTRAL) se3_neutralise(mol);
  else if (o->protonate == OB_PROT_PH) se3_protonate(mol, o->ph);
  else if (o->standardize == OB_STD_BASIC) se3_drop_nh_stereo(mol);
  if (!o->allow_radicals) {
    int unpaired = 0, at = se3_first_radical(mol, &unpaired);
    if (at) {
      OBAtom *a = mol.GetAtom(at);
      put_reason(why, "radical", at,
                 std::string(OBElements::GetSymbol(a->GetAtomicNum())) + " atom " + std::to_string(at) + " has " +
                     std::to_string(unpaired) + " unpaired electron" + (unpaired == 1 ? "" : "s") +
                     " (stages.ingest.allow_radicals: true keeps it)");
      return 1;
    }
  }
  return 0;
}

// Aromaticity perceived afresh, the dimension the input has, the canonical
// SMILES, InChIKey, formula, charge, name and the file's tags: 0, or 1
// refused.
int identify(OBMol &mol, parsed &p, mol_why *why) {
  // Aromaticity perceived afresh, by Open Babel's one model, whatever the
  // file said: a MOL2 file's "ar" bonds and a reader's own flags otherwise
  // win, and the same molecule comes out as two (DUD-E FABP4 read from
  // MOL2: thiophenes, pyrroles and pyrazoles non-aromatic, 19 of 57 actives
  // and 1,760 of 2,855 decoys with the canonical SMILES of their own Kekulé
  // SMILES; perceived afresh, all of them). The atoms' and bonds' flags,
  // the canonical SMILES and the InChIKey below all see this perception.
  mol.SetAromaticPerceived(false);

  int dim = mol.GetDimension();
  if ((dim == 2 || dim == 3) && !mol.HasNonZeroCoords()) dim = 0;
  if (dim != 2 && dim != 3) dim = 0;
  p.dim = dim;

  p.smiles = trim(g_can->WriteString(&mol, true));
  if (p.smiles.empty()) {
    put_reason(why, "no canonical SMILES");
    return 1;
  }
  p.ikey = trim(g_ikey->WriteString(&mol, true));
  if (p.ikey.empty()) {
    put_reason(why, "no InChIKey");
    return 1;
  }
  p.formula = mol.GetFormula();
  p.charge = mol.GetTotalCharge();
  p.title = trim(mol.GetTitle());

  for (OBGenericData *d : mol.GetData())
    if (d && d->GetDataType() == OBGenericDataType::PairData && d->GetOrigin() == fileformatInput)
      p.tags.emplace_back(d->GetAttribute(), static_cast<OBPairData *>(d)->GetValue());
  return 0;
}

// The shape: 3D generated (with the other conformers) when gen3d asks, else
// the input's coordinates with hydrogens added when asked. 0, or 1 refused.
int make_shape(const char *text, size_t len, const ob_parse_opts *o, OBMol &mol, parsed &p, mol_why *why) {
  p.made3d = o->gen3d == OB_GEN3D_ALWAYS || (o->gen3d == OB_GEN3D_AUTO && p.dim != 3);
  // What a molecule takes in the stages after grows with its atoms times its
  // shapes (each conformer's graph, basis and activations): past the bound it
  // is refused here, before any shape is made.
  long n_atoms = p.n_atoms, n_shapes = p.made3d && o->conformers > 1 ? o->conformers : 1;
  if (o->max_atom_conformers > 0 && n_atoms * n_shapes > o->max_atom_conformers) {
    put_reason(why, "too many atoms for its conformers", 0,
               std::to_string(n_atoms) + " atoms x " + std::to_string(n_shapes) +
                   " conformers = " + std::to_string(n_atoms * n_shapes) + " > " +
                   std::to_string(o->max_atom_conformers) + " (stages.ingest.max_atom_conformers)");
    return 1;
  }
  // (no stereo on an N-H where the standardiser or protonation drops it)
  bool skip_nh = o->standardize == OB_STD_BASIC || o->protonate != OB_PROT_KEEP;
  if (p.made3d) {
    std::string gen_why;
    se3_gen3d_trace tr{};
    graph_only(mol, p.smiles, o);
    se3_stereo_free(mol, skip_nh, &p.free_tetra, &p.free_cistrans);
    unsigned seed = o->seed ^ hash_text(p.smiles.data(), p.smiles.size());
    bool made = se3_gen3d_traced(mol, o, seed, gen_why, &tr);
    static const bool trace = std::getenv("SE3_GEN3D_TRACE") != nullptr;
    if (trace) // SE3_GEN3D_TRACE=1, for measurements: which check failed, what fixed it, the times
      std::fprintf(stderr, "gen3d-trace first_fail=%d last_fail=%d fixed_by=%d builds=%d build_ms=%.3f h_ms=%.3f check_ms=%.3f fix_ms=%.3f why=%s\n",
                   (int)tr.first_fail, (int)tr.last_fail, (int)tr.fixed_by, tr.builds, 1e3 * tr.t_build,
                   1e3 * tr.t_hydrogens, 1e3 * tr.t_checks, 1e3 * tr.t_fixes, tr.first_why);
    if (!made) {
      // one reason per failed check, the atom beside it
      const char *kind = tr.last_fail == GEN3D_STEREO  ? "3D generation: stereo not kept"
                         : tr.last_fail == GEN3D_CLASH ? "3D generation: atoms clash"
                         : tr.last_fail == GEN3D_SHAPE ? "3D generation: shape out of bounds"
                                                       : "3D generation failed";
      put_reason(why, kind, tr.atom, gen_why);
      return 1;
    }
    p.dim = 3;
    if (tr.first_fail == GEN3D_SHAPE) p.shape = MOL_SHAPE_FIXED; // out of bounds at first, fixed
    // the isomer the shape has, said (issue 70); the other conformers turn
    // single bonds outside rings only and keep it (chem/conformers.h)
    if (p.free_tetra + p.free_cistrans > 0) p.isomer = se3_isomer_smiles(mol, skip_nh);
    if (o->conformers > 1) p.n_more = se3_more_conformers(mol, o, seed, p.more);
  } else if (o->add_hydrogens) {
    // Hydrogens on a 3D molecule point along directions Open Babel draws
    // from rand(): seed it from the record so the result does not depend on
    // what this process parsed before.
    se3_ob_srand(o->seed ^ hash_text(text, len));
    mol.AddHydrogens(); // placed from the geometry when there is one
  }
  return 0;
}

// The molecule into *out (struct mol, chem/mol.h): 0, or 1 out of memory.
int copy_out(OBMol &mol, const parsed &p, struct mol *out, mol_why *why) {
  std::free(out->name); // (the name taken when read)
  mol_init(out);
  out->name = dup_c(p.title);
  out->smiles = dup_c(p.smiles);
  out->inchikey = dup_c(p.ikey);
  out->formula = dup_c(p.formula);
  out->dim = p.dim;
  out->coords_gen3d = p.made3d;
  out->shape = p.shape;
  out->charge = p.charge;
  out->stereo_free = p.free_tetra + p.free_cistrans;
  out->isomer_smiles = p.isomer.empty() ? nullptr : dup_c(p.isomer);
  out->n_atoms = (int)mol.NumAtoms();
  out->n_bonds = (int)mol.NumBonds();
  out->atoms = (mol_atom *)std::calloc(out->n_atoms ? out->n_atoms : 1, sizeof *out->atoms);
  out->bonds = (mol_bond *)std::calloc(out->n_bonds ? out->n_bonds : 1, sizeof *out->bonds);
  if (!out->name || !out->smiles || !out->inchikey || !out->formula || !out->atoms || !out->bonds ||
      (!p.isomer.empty() && !out->isomer_smiles)) {
    mol_free(out);
    put_reason(why, "out of memory");
    return 1;
  }
  int i = 0;
  FOR_ATOMS_OF_MOL(a, mol) {
    mol_atom &t = out->atoms[i++];
    t.z = (uint8_t)a->GetAtomicNum();
    t.charge = (int8_t)a->GetFormalCharge();
    t.aromatic = a->IsAromatic() ? 1 : 0;
    t.implicit_h = a->GetImplicitHCount();
    t.isotope = a->GetIsotope(); // 0 unless the input gave a mass number (16 bits in both)
    t.x = a->GetX();
    t.y = a->GetY();
    t.z_ = a->GetZ();
  }
  i = 0;
  FOR_BONDS_OF_MOL(b, mol) {
    mol_bond &t = out->bonds[i++];
    unsigned x = b->GetBeginAtomIdx() - 1, y = b->GetEndAtomIdx() - 1;
    t.a = x < y ? x : y;
    t.b = x < y ? y : x;
    int order = b->GetBondOrder();
    t.order = b->IsAromatic() ? MOL_BOND_AROMATIC : (order >= 1 && order <= 3 ? order : 1);
  }
  for (auto &tg : p.tags)
    if (mol_add_tag(out, tg.first.c_str(), tg.second.c_str()) != 0) {
      mol_free(out);
      put_reason(why, "out of memory");
      return 1;
    }
  if (p.n_more > 0) {
    out->confs = (double *)std::malloc(p.more.size() * sizeof *out->confs);
    if (!out->confs) {
      mol_free(out);
      put_reason(why, "out of memory");
      return 1;
    }
    std::memcpy(out->confs, p.more.data(), p.more.size() * sizeof *out->confs);
    out->n_confs = p.n_more;
  }
  return 0;
}

// One record: its text refused, read, standardised, named, shaped and
// copied out, each a step above. 0, or 1 refused with the reason in *why.
int parse(const char *text, size_t len, const ob_parse_opts *o, struct mol *out, mol_why *why) {
  if (refuse_text(text, len, o, why)) return 1;
  OBMol mol;
  parsed p;
  if (read_record(text, len, o, mol, out, p, why) || standardise(text, len, o, mol, why) || identify(mol, p, why) ||
      make_shape(text, len, o, mol, p, why))
    return 1;
  return copy_out(mol, p, out, why);
}

} // namespace

extern "C" int ob_init(void) {
  if (g_ready) return 0;
  try {
    OneOmpThread one;
    g_sink = new std::ostringstream;
    obErrorLog.SetOutputStream(g_sink);
    obErrorLog.StartLogging();
    obErrorLog.StartErrorWrap(); // std::cerr chatter (e.g. stereo warnings) goes to the log
    g_in = new OBConversion;
    g_can = new OBConversion;
    g_ikey = new OBConversion;
    g_sdf = new OBConversion;
    if (!g_can->SetOutFormat("can") || !g_ikey->SetOutFormat("inchikey") || !g_sdf->SetOutFormat("sdf") ||
        !g_in->SetInFormat("smi"))
      return -1;
    g_in_format = "smi";
    g_can->AddOption("n", OBConversion::OUTOPTIONS);
    g_ready = true;
    // Warm-up: load formats, InChI and force-field parameters before any fork.
    ob_parse_opts o = {};
    o.format = "smi";
    o.add_hydrogens = 1;
    o.gen3d = OB_GEN3D_ALWAYS;
    o.quality = OB_Q_MEDIUM;
    struct mol m;
    mol_init(&m);
    mol_why why;
    const char *warm = "OCC(=O)N\n";
    if (parse(warm, std::strlen(warm), &o, &m, &why) != 0) {
      g_ready = false;
      return -1;
    }
    mol_free(&m);
    clear_log();
    return 0;
  } catch (...) {
    g_ready = false;
    return -1;
  }
}

extern "C" int ob_parse_why(const char *text, size_t len, const struct ob_parse_opts *o, struct mol *out,
                            struct mol_why *why) {
  mol_init(out);
  mol_why_clear(why);
  if (!g_ready && ob_init() != 0) {
    put_reason(why, "Open Babel failed to initialise");
    return 1;
  }
  try {
    OneOmpThread one;
    int rc = parse(text, len, o, out, why);
    if (rc != 0) { // a rejection keeps the record's name alone
      char *name = out->name;
      out->name = nullptr;
      mol_free(out);
      out->name = name;
    }
    return rc;
  } catch (const std::exception &e) {
    mol_free(out);
    put_reason(why, "internal error", 0, e.what());
    return 1;
  } catch (...) {
    mol_free(out);
    put_reason(why, "internal error");
    return 1;
  }
}

extern "C" int ob_parse(const char *text, size_t len, const struct ob_parse_opts *o, struct mol *out, char *reason,
                        size_t reason_len) {
  mol_why why;
  int rc = ob_parse_why(text, len, o, out, &why);
  if (rc != 0) mol_free(out); // (its name too: ob_parse leaves nothing to free on a rejection)
  if (rc != 0) mol_why_text(&why, reason, reason_len);
  else if (reason && reason_len) reason[0] = 0;
  return rc;
}

// m's atoms and bonds into mol (aromatic flags kept, bonds given Kekulé
// orders; mass numbers when with_isotopes, so that the writers give M  ISO
// lines and [13C]); false on a bad bond.
static bool build_obmol(const struct mol *m, OBMol &mol, bool with_isotopes) {
  mol.BeginModify();
  for (int i = 0; i < m->n_atoms; i++) {
    const mol_atom &a = m->atoms[i];
    OBAtom *t = mol.NewAtom();
    t->SetAtomicNum(a.z);
    t->SetFormalCharge(a.charge);
    t->SetImplicitHCount(a.implicit_h);
    if (with_isotopes) t->SetIsotope(a.isotope);
    t->SetVector(a.x, a.y, a.z_);
    if (a.aromatic) t->SetAromatic();
  }
  bool aromatic = false;
  for (int i = 0; i < m->n_bonds; i++) {
    const mol_bond &b = m->bonds[i];
    if (b.a >= (uint32_t)m->n_atoms || b.b >= (uint32_t)m->n_atoms || b.a == b.b) return false;
    bool ar = b.order == MOL_BOND_AROMATIC;
    if (!mol.AddBond((int)b.a + 1, (int)b.b + 1, ar ? 1 : b.order)) return false;
    if (ar) {
      mol.GetBond(mol.NumBonds() - 1)->SetAromatic();
      aromatic = true;
    }
  }
  mol.EndModify(false);
  mol.SetDimension(m->dim == 3 ? 3 : m->dim == 2 ? 2 : 0);
  if (aromatic) {
    // Aromatic atom and bond flags came from the molecule; give the bonds
    // Kekulé orders for the writers.
    mol.SetAromaticPerceived();
    OBKekulize(&mol);
  }
  return true;
}

extern "C" char *ob_write_sdf(const struct mol *m) {
  if (!m || m->n_atoms < 0 || (m->n_atoms && !m->atoms)) return nullptr;
  if (!g_ready && ob_init() != 0) return nullptr;
  try {
    OneOmpThread one;
    OBMol mol;
    if (!build_obmol(m, mol, true)) return nullptr;
    mol.SetTitle(m->name ? m->name : "");
    for (int i = 0; i < m->n_tags; i++) {
      OBPairData *pd = new OBPairData;
      pd->SetAttribute(m->tags[i].name ? m->tags[i].name : "");
      pd->SetValue(m->tags[i].value ? m->tags[i].value : "");
      pd->SetOrigin(fileformatInput);
      mol.SetData(pd);
    }
    clear_log();
    std::string s = g_sdf->WriteString(&mol);
    if (s.empty()) return nullptr;
    return dup_c(s);
  } catch (...) { return nullptr; }
}

// ---- docking (chem/dock.h) ---------------------------------------------------

// err (may be NULL) of the kind, its message s, its file path (NULL: none).
static void put_err(struct se3_error *err, enum se3_err_kind kind, const std::string &s, const char *path = nullptr) {
  se3_error_set(err, kind, "%s", s.c_str());
  if (path) se3_error_at(err, path, 0, 0);
}

// The log's last message, or `dflt`.
static std::string last_message(const char *dflt) {
  std::vector<std::string> msgs = logged_messages();
  return msgs.empty() ? std::string(dflt) : msgs.front();
}

// mol as PDBQT with the writer option `opt` ("p": atom serials as the
// atoms' numbers; "r": rigid), or "" with err (`path`, when not NULL, the
// input file: the error's place).
static std::string pdbqt_text(OBMol &mol, const char *opt, const char *path, struct se3_error *err) {
  OBConversion conv;
  if (!conv.SetOutFormat("pdbqt")) {
    put_err(err, SE3_ERR_RUN, "Open Babel has no PDBQT writer");
    return std::string();
  }
  conv.AddOption(opt, OBConversion::OUTOPTIONS);
  std::string s = conv.WriteString(&mol);
  if (s.find("ATOM") == std::string::npos && s.find("HETATM") == std::string::npos) {
    put_err(err, SE3_ERR_INPUT, last_message("Open Babel wrote no atoms"), path);
    return std::string();
  }
  return s;
}

extern "C" char *ob_write_pdbqt(const struct mol *m, int **map, int *n_map, struct se3_error *err) {
  *map = nullptr;
  *n_map = 0;
  if (!m || m->n_atoms <= 0 || !m->atoms) {
    put_err(err, SE3_ERR_INPUT, "no atoms");
    return nullptr;
  }
  if (!g_ready && ob_init() != 0) {
    put_err(err, SE3_ERR_RUN, "Open Babel did not start");
    return nullptr;
  }
  try {
    OneOmpThread one;
    OBMol mol;
    if (!build_obmol(m, mol, false)) {
      put_err(err, SE3_ERR_INPUT, "a bond names an atom the molecule does not have");
      return nullptr;
    }
    mol.SetTitle(m->name ? m->name : "");
    // The hydrogens the molecule holds as counts, placed in 3D after its own
    // atoms; then the non-polar ones (on carbon) go, as the writer would drop
    // them, but here, so that each atom left is known by its number in m.
    mol.AddHydrogens(false, false);
    std::vector<OBAtom *> drop;
    std::map<OBAtom *, int> was;
    FOR_ATOMS_OF_MOL(a, mol) {
      int i = (int)a->GetIdx() - 1;
      was[&*a] = i < m->n_atoms ? i : -1;
      if (a->IsNonPolarHydrogen()) drop.push_back(&*a);
    }
    mol.BeginModify();
    for (OBAtom *a : drop)
      mol.DeleteAtom(a);
    mol.EndModify(false);
    std::vector<int> order;
    FOR_ATOMS_OF_MOL(a, mol)
    order.push_back(was[&*a]);
    // Gasteiger charges, as AutoDock's tools give a ligand (Vina reads
    // none): asking for one has Open Babel compute them all (its automatic
    // model is Gasteiger's), and the writer then writes them
    FOR_ATOMS_OF_MOL(a, mol)
    a->GetPartialCharge();
    clear_log();
    std::string s = pdbqt_text(mol, "p", nullptr, err); // atom serials = the atoms' numbers here
    if (s.empty()) return nullptr;
    if ((int)mol.NumAtoms() != (int)order.size()) {
      put_err(err, SE3_ERR_RUN, "the PDBQT writer dropped atoms");
      return nullptr;
    }
    int *out = (int *)std::malloc(sizeof(int) * (order.size() ? order.size() : 1));
    char *text = dup_c(s);
    if (!out || !text) {
      std::free(out);
      std::free(text);
      put_err(err, SE3_ERR_MEMORY, "out of memory");
      return nullptr;
    }
    std::copy(order.begin(), order.end(), out);
    *map = out;
    *n_map = (int)order.size();
    return text;
  } catch (...) {
    put_err(err, SE3_ERR_RUN, "Open Babel failed");
    return nullptr;
  }
}

// The first molecule of a file, read by its extension (.gz read through).
static bool read_first(const char *path, OBMol &mol, struct se3_error *err) {
  OBConversion conv;
  OBFormat *f = conv.FormatFromExt(path);
  if (!f || !conv.SetInFormat(f)) {
    put_err(err, SE3_ERR_INPUT, "Open Babel reads no format by this file's extension", path);
    return false;
  }
  clear_log();
  if (!conv.ReadFile(&mol, path) || mol.NumAtoms() == 0) {
    put_err(err, SE3_ERR_INPUT, last_message("no molecule read"), path);
    return false;
  }
  return true;
}

extern "C" char *ob_receptor_pdbqt(const char *path, double ph, struct se3_error *err) {
  if (!g_ready && ob_init() != 0) {
    put_err(err, SE3_ERR_RUN, "Open Babel did not start");
    return nullptr;
  }
  try {
    OneOmpThread one;
    OBMol mol;
    if (!read_first(path, mol, err)) return nullptr;
    mol.AddHydrogens(false, true, ph); // polar ones are what the writer keeps
    std::string s = pdbqt_text(mol, "r", path, err); // rigid: no torsion tree
    if (s.empty()) return nullptr;
    return dup_c(s);
  } catch (...) {
    put_err(err, SE3_ERR_RUN, "Open Babel failed", path);
    return nullptr;
  }
}

extern "C" int ob_file_extent(const char *path, double lo[3], double hi[3], int *n_atoms, struct se3_error *err) {
  if (!g_ready && ob_init() != 0) {
    put_err(err, SE3_ERR_RUN, "Open Babel did not start");
    return -1;
  }
  try {
    OneOmpThread one;
    OBMol mol;
    if (!read_first(path, mol, err)) return -1;
    int n = 0;
    FOR_ATOMS_OF_MOL(a, mol) {
      double v[3] = {a->GetX(), a->GetY(), a->GetZ()};
      for (int k = 0; k < 3; k++) {
        if (!n || v[k] < lo[k]) lo[k] = v[k];
        if (!n || v[k] > hi[k]) hi[k] = v[k];
      }
      n++;
    }
    *n_atoms = n;
    if (mol.GetDimension() != 3) {
      put_err(err, SE3_ERR_INPUT, "the molecule has no 3D coordinates", path);
      return -1;
    }
    return 0;
  } catch (...) {
    put_err(err, SE3_ERR_RUN, "Open Babel failed", path);
    return -1;
  }
}

extern "C" char *ob_canonical_smiles(const struct mol *m) {
  if (!m || m->n_atoms < 0 || (m->n_atoms && !m->atoms)) return nullptr;
  if (!g_ready && ob_init() != 0) return nullptr;
  try {
    OneOmpThread one;
    OBMol mol;
    // No isotopes, and no stereo from coordinates: the key is the graph's (a
    // scaffold key, where [13C]benzene and benzene are one scaffold).
    if (!build_obmol(m, mol, false)) return nullptr;
    mol.SetDimension(0);
    clear_log();
    std::string s = g_can->WriteString(&mol);
    return dup_c(trim(s));
  } catch (...) { return nullptr; }
}

extern "C" char *ob_isomer_smiles(const struct mol *m, int skip_nh) {
  if (!m || m->dim != 3 || m->n_atoms < 0 || (m->n_atoms && !m->atoms)) return nullptr;
  if (!g_ready && ob_init() != 0) return nullptr;
  try {
    OneOmpThread one;
    OBMol mol;
    if (!build_obmol(m, mol, true)) return nullptr;
    clear_log();
    std::string s = se3_isomer_smiles(mol, skip_nh != 0);
    return s.empty() ? nullptr : dup_c(s);
  } catch (...) { return nullptr; }
}

// Open Babel draws a bond OB_BOND_UNITS long in the drawing's own units
// (the inner <svg>'s viewBox) and fits the whole drawing into the square
// it is given: a molecule twice as wide gets bonds half as long, and a
// large one's labels become unreadable. So the square grows (from px) until
// a bond is DEPICT_BOND_PX on screen: the outer width and height are
// rewritten; their viewBox, and so the drawing, scale with them.
enum { OB_BOND_UNITS = 40, DEPICT_BOND_PX = 25 }; // labels then about 10 px
static void depict_size(std::string &s, int px) {
  size_t inner = s.find("<svg", 1);
  size_t vb = inner == std::string::npos ? inner : s.find("viewBox=\"", inner);
  double x0, y0, w, h;
  if (vb == std::string::npos || std::sscanf(s.c_str() + vb + 9, "%lf %lf %lf %lf", &x0, &y0, &w, &h) != 4 ||
      !(w > 0) || !(h > 0))
    return;
  double span = w > h ? w : h, need = std::ceil(span * DEPICT_BOND_PX / OB_BOND_UNITS);
  if (need <= px) return;
  char old_size[64], new_size[64];
  std::snprintf(old_size, sizeof old_size, "width=\"%dpx\" height=\"%dpx\"", px, px);
  std::snprintf(new_size, sizeof new_size, "width=\"%.0fpx\" height=\"%.0fpx\"", need, need);
  size_t k = s.find(old_size);
  if (k != std::string::npos && k < inner) s.replace(k, std::strlen(old_size), new_size);
}

extern "C" char *ob_depict_svg(const char *smiles, int px) {
  if (!smiles || !*smiles) return nullptr;
  if (!g_ready && ob_init() != 0) return nullptr;
  try {
    OneOmpThread one;
    OBConversion conv;
    if (!conv.SetInAndOutFormats("smi", "svg")) return nullptr;
    char size[16];
    snprintf(size, sizeof size, "%d", px > 0 ? px : 160);
    conv.AddOption("d", OBConversion::OUTOPTIONS); // no title: the table beside it names the molecule
    conv.AddOption("P", OBConversion::OUTOPTIONS, size);
    OBMol mol;
    clear_log();
    if (!conv.ReadString(&mol, smiles) || mol.NumAtoms() == 0) return nullptr;
    std::string s = conv.WriteString(&mol);
    // inline in HTML: no XML prolog, and no id that every depiction would repeat
    size_t at = s.find("<svg");
    if (at == std::string::npos) return nullptr;
    s.erase(0, at);
    const std::string id = " id=\"topsvg\"";
    for (size_t k; (k = s.find(id)) != std::string::npos;)
      s.erase(k, id.size());
    depict_size(s, px > 0 ? px : 160);
    return dup_c(trim(s));
  } catch (...) { return nullptr; }
}

extern "C" const char *ob_gen3d_fallback(void) { return se3_etkdg_available() ? "RDKit ETKDGv3" : nullptr; }

extern "C" const char *ob_version(void) {
  static std::string v;
  try {
    if (v.empty()) v = OBReleaseVersion();
  } catch (...) { return "unknown"; }
  return v.c_str();
}
