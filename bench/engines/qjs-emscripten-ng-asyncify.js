// quickjs-emscripten with the QuickJS-ng asyncify WASM build (the one @langchain/quickjs uses).
import { emscriptenAdapter } from "./emscripten.js";

export default emscriptenAdapter({
  id: "wasm-ng-asyncify",
  label: "quickjs-emscripten (ng, asyncify)",
  variantPackage: "@jitl/quickjs-ng-wasmfile-release-asyncify",
  asyncify: true,
});
