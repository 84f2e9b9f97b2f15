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
}

#include <omp.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

// Open Babel's headers are not -Wextra clean.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-copy"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <openbabel/atom.h>
#include <openbabel/base.h>
#include <openbabel/bond.h>
#include <openbabel/builder.h>
#include <openbabel/forcefield.h>
#include <openbabel/generic.h>
#include <openbabel/kekulize.h>
#include <openbabel/math/vector3.h>
#include <openbabel/mol.h>
#include <openbabel/obconversion.h>
#include <openbabel/oberror.h>
#include <openbabel/obiter.h>
#pragma GCC diagnostic pop

using namespace OpenBabel;

namespace {

const int DEFAULT_MAX_ATOMS = 999;
const size_t DEFAULT_MAX_RECORD = (size_t)64 << 20;

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

void put_reason(char *reason, size_t len, const std::string &s) {
  if (!reason || !len) return;
  std::snprintf(reason, len, "%s", s.c_str());
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

bool coords_ok(OBMol &mol) {
  if (mol.NumAtoms() > 1 && !mol.HasNonZeroCoords()) return false;
  FOR_ATOMS_OF_MOL(a, mol) {
    if (!std::isfinite(a->GetX()) || !std::isfinite(a->GetY()) || !std::isfinite(a->GetZ())) return false;
  }
  return true;
}

// OBBuilder may stack disconnected fragments on top of each other (two
// benzenes came out superimposed): lay them out along x, each centred on the
// x axis, 3 Å between bounding boxes.
void separate_fragments(OBMol &mol) {
  std::vector<std::vector<int>> frags;
  mol.ContigFragList(frags);
  if (frags.size() < 2) return;
  double cursor = 0;
  for (const std::vector<int> &f : frags) {
    double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {-1e300, -1e300, -1e300};
    for (int idx : f) {
      const double *c = mol.GetAtom(idx)->GetCoordinate();
      for (int k = 0; k < 3; k++)
        lo[k] = std::fmin(lo[k], c[k]), hi[k] = std::fmax(hi[k], c[k]);
    }
    vector3 shift(cursor - lo[0], -(lo[1] + hi[1]) / 2, -(lo[2] + hi[2]) / 2);
    for (int idx : f) {
      OBAtom *a = mol.GetAtom(idx);
      a->SetVector(a->GetVector() + shift);
    }
    cursor += hi[0] - lo[0] + 3.0;
  }
}

// A new instance of a force field, logging into a sink (Setup crashes on a
// new instance without a log file).
OBForceField *fresh_forcefield(const char *name) {
  static std::ostringstream sink;
  OBForceField *proto = OBForceField::FindForceField(name);
  if (!proto) return nullptr;
  OBForceField *ff = proto->MakeNewInstance();
  if (!ff) return nullptr;
  sink.str("");
  ff->SetLogFile(&sink);
  ff->SetLogLevel(OBFF_LOGLVL_NONE);
  return ff;
}

// Builder coordinates, hydrogens when asked, then force-field refinement.
bool gen3d(OBMol &mol, const ob_parse_opts *o, const char *text, size_t len) {
  std::srand(o->seed ^ hash_text(text, len));
  OBBuilder builder;
  if (!builder.Build(mol)) return false;
  mol.SetDimension(3);
  if (o->add_hydrogens) mol.AddHydrogens();
  separate_fragments(mol);
  if (o->quality != OB_Q_FAST) {
    int steps = o->quality == OB_Q_BEST ? 2000 : 250;
    double econv = o->quality == OB_Q_BEST ? 1e-6 : 1e-4;
    // A fresh force field per molecule: the shared instance skips its setup
    // when the previous molecule looks alike (same atoms and bonds count, e.g.
    // a positional isomer) and then minimises with the previous molecule's
    // terms, so results would depend on what the worker parsed before.
    std::unique_ptr<OBForceField> ff(fresh_forcefield("MMFF94"));
    if (!ff || !ff->Setup(mol)) {
      ff.reset(fresh_forcefield("UFF"));
      if (ff && !ff->Setup(mol)) ff.reset();
    }
    if (ff) {
      OBMol before(mol);
      ff->ConjugateGradients(steps, econv);
      ff->GetCoordinates(mol);
      if (!coords_ok(mol)) mol = before; // keep the builder's geometry
    }
  }
  return coords_ok(mol);
}

int parse(const char *text, size_t len, const ob_parse_opts *o, struct mol *out, char *reason, size_t rlen) {
  if (!o || !o->format || !text) {
    put_reason(reason, rlen, "internal error: no text or format");
    return 1;
  }
  size_t max_bytes = o->max_record_bytes ? o->max_record_bytes : DEFAULT_MAX_RECORD;
  int max_atoms = o->max_atoms > 0 ? o->max_atoms : DEFAULT_MAX_ATOMS;
  if (len > max_bytes) {
    put_reason(reason, rlen,
               "record too large (" + std::to_string(len) + " > " + std::to_string(max_bytes) + " bytes)");
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
    put_reason(reason, rlen,
               "NUL byte at line " + std::to_string(line) + " column " + std::to_string(col) + " of the record");
    return 1;
  }
  if (g_in_format != o->format) {
    if (!g_in->SetInFormat(o->format)) {
      g_in_format.clear();
      put_reason(reason, rlen, std::string("unknown Open Babel format '") + o->format + "'");
      return 1;
    }
    g_in_format = o->format;
  }

  clear_log();
  OBMol mol;
  bool ok = g_in->ReadString(&mol, std::string(text, len));
  std::vector<std::string> msgs = logged_messages();
  if (!ok) {
    put_reason(reason, rlen, msgs.empty() ? "parse failed (no message)" : "parse failed: " + msgs[0]);
    return 1;
  }
  if (mol.NumAtoms() == 0) {
    put_reason(reason, rlen, "no atoms");
    return 1;
  }
  for (const std::string &m : msgs)
    if (contains_nocase(m, "kekulize")) {
      put_reason(reason, rlen, "kekulization failed: " + m);
      return 1;
    }
  long n_atoms = (long)mol.NumAtoms();
  if (o->add_hydrogens) FOR_ATOMS_OF_MOL(a, mol) n_atoms += a->GetImplicitHCount();
  if (n_atoms > max_atoms) {
    put_reason(reason, rlen, "too many atoms (" + std::to_string(n_atoms) + " > " + std::to_string(max_atoms) + ")");
    return 1;
  }
  FOR_ATOMS_OF_MOL(a, mol) {
    if (a->GetAtomicNum() == 0) {
      put_reason(reason, rlen, "dummy atom (atom " + std::to_string(a->GetIdx()) + ")");
      return 1;
    }
    int q = a->GetFormalCharge();
    if (q < -127 || q > 127) {
      put_reason(reason, rlen,
                 "formal charge " + std::to_string(q) + " out of range (atom " + std::to_string(a->GetIdx()) + ")");
      return 1;
    }
  }

  int dim = mol.GetDimension();
  if ((dim == 2 || dim == 3) && !mol.HasNonZeroCoords()) dim = 0;
  if (dim != 2 && dim != 3) dim = 0;

  std::string smiles = trim(g_can->WriteString(&mol, true));
  if (smiles.empty()) {
    put_reason(reason, rlen, "no canonical SMILES");
    return 1;
  }
  std::string ikey = trim(g_ikey->WriteString(&mol, true));
  if (ikey.empty()) {
    put_reason(reason, rlen, "no InChIKey");
    return 1;
  }
  std::string formula = mol.GetFormula();
  int charge = mol.GetTotalCharge();
  std::string title = trim(mol.GetTitle());

  std::vector<std::pair<std::string, std::string>> tags;
  for (OBGenericData *d : mol.GetData())
    if (d && d->GetDataType() == OBGenericDataType::PairData && d->GetOrigin() == fileformatInput)
      tags.emplace_back(d->GetAttribute(), static_cast<OBPairData *>(d)->GetValue());

  int made3d = o->gen3d == OB_GEN3D_ALWAYS || (o->gen3d == OB_GEN3D_AUTO && dim != 3);
  if (made3d) {
    if (!gen3d(mol, o, text, len)) {
      put_reason(reason, rlen, "3D generation failed");
      return 1;
    }
    dim = 3;
  } else if (o->add_hydrogens) {
    // Hydrogens on a 3D molecule point along directions Open Babel draws
    // from rand(): seed it from the record so the result does not depend on
    // what this process parsed before.
    std::srand(o->seed ^ hash_text(text, len));
    mol.AddHydrogens(); // placed from the geometry when there is one
  }

  mol_init(out);
  out->name = dup_c(title);
  out->smiles = dup_c(smiles);
  out->inchikey = dup_c(ikey);
  out->formula = dup_c(formula);
  out->dim = dim;
  out->coords_gen3d = made3d;
  out->charge = charge;
  out->n_atoms = (int)mol.NumAtoms();
  out->n_bonds = (int)mol.NumBonds();
  out->atoms = (mol_atom *)std::calloc(out->n_atoms ? out->n_atoms : 1, sizeof *out->atoms);
  out->bonds = (mol_bond *)std::calloc(out->n_bonds ? out->n_bonds : 1, sizeof *out->bonds);
  if (!out->name || !out->smiles || !out->inchikey || !out->formula || !out->atoms || !out->bonds) {
    mol_free(out);
    put_reason(reason, rlen, "out of memory");
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
  for (auto &tg : tags)
    if (mol_add_tag(out, tg.first.c_str(), tg.second.c_str()) != 0) {
      mol_free(out);
      put_reason(reason, rlen, "out of memory");
      return 1;
    }
  return 0;
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
    // Open Babel seeds rand() from the clock on first use; use it once now so
    // that our srand() per molecule is the last word.
    vector3 v;
    v.randomUnitVector();
    g_ready = true;
    // Warm-up: load formats, InChI and force-field parameters before any fork.
    ob_parse_opts o = {};
    o.format = "smi";
    o.add_hydrogens = 1;
    o.gen3d = OB_GEN3D_ALWAYS;
    o.quality = OB_Q_MEDIUM;
    struct mol m;
    mol_init(&m);
    char why[256];
    const char *warm = "OCC(=O)N\n";
    if (parse(warm, std::strlen(warm), &o, &m, why, sizeof why) != 0) {
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

extern "C" int ob_parse(const char *text, size_t len, const struct ob_parse_opts *o, struct mol *out, char *reason,
                        size_t reason_len) {
  mol_init(out);
  if (!g_ready && ob_init() != 0) {
    put_reason(reason, reason_len, "Open Babel failed to initialise");
    return 1;
  }
  try {
    OneOmpThread one;
    int rc = parse(text, len, o, out, reason, reason_len);
    if (rc != 0) mol_free(out);
    return rc;
  } catch (const std::exception &e) {
    mol_free(out);
    put_reason(reason, reason_len, std::string("internal error: ") + e.what());
    return 1;
  } catch (...) {
    mol_free(out);
    put_reason(reason, reason_len, "internal error");
    return 1;
  }
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
    return dup_c(trim(s));
  } catch (...) { return nullptr; }
}

extern "C" const char *ob_version(void) {
  static std::string v;
  try {
    if (v.empty()) v = OBReleaseVersion();
  } catch (...) { return "unknown"; }
  return v.c_str();
}
