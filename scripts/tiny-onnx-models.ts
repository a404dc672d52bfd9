/**
 * `npx tsx scripts/tiny-onnx-models.ts [folder]` (default ./models): writes three tiny, real ONNX models
 * (text, image, audio; the ones the test suite builds) into `folder`, laid out as TESSERA_MODEL_DIR expects.
 * They are for trying the ONNX plugin without exporting a model of your own: their embeddings are 8-, 4-
 * and 3-dimensional and mean little. Nothing is downloaded.
 */
import path from 'node:path';
import { writeTinyOnnxModels } from '../test/support/onnx/index.js';

const given = process.argv[2] ?? './models';
const folder = path.resolve(given);
const written = await writeTinyOnnxModels(folder);
console.log(`wrote ${written.textModelName}, ${written.imageModelName} and ${written.audioModelName} into ${folder}`);
console.log(`start the service with TESSERA_MODEL_DIR=${given} to serve them`);
