/* le.h — little-endian reading and writing of the stored blobs (molecule,
 * graph, bases): the byte order is fixed whatever the machine's. Header-only,
 * shared by chem/ and models/, depending on nothing. */
#ifndef SE3_LE_H
#define SE3_LE_H

#include <stdint.h>
#include <string.h>

static inline void le_put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void le_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static inline void le_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t le_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t le_get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}
static inline uint64_t le_get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}
static inline void le_put_f32(uint8_t *p, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  le_put_u32(p, u);
}
static inline float le_get_f32(const uint8_t *p) {
  uint32_t u = le_get_u32(p);
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline void le_put_f64(uint8_t *p, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  le_put_u64(p, u);
}
static inline double le_get_f64(const uint8_t *p) {
  uint64_t u = le_get_u64(p);
  double d;
  memcpy(&d, &u, 8);
  return d;
}

#endif
