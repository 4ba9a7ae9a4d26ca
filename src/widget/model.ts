/** The report widget's model: `report` (a report as JSON) and `progress` ({stage, fraction} or null). */
import { DOMWidgetModel, type ISerializers } from '@jupyter-widgets/base';
import { MODULE_NAME, MODULE_VERSION } from './version';

export interface WidgetProgress {
  stage: string;
  /** 0-1, or null while unknown. */
  fraction: number | null;
}

export class ReportModel extends DOMWidgetModel {
  static override serializers: ISerializers = { ...DOMWidgetModel.serializers };

  static model_name = 'ReportModel';
  static model_module = MODULE_NAME;
  static model_module_version = MODULE_VERSION;
  static view_name = 'ReportView';
  static view_module = MODULE_NAME;
  static view_module_version = MODULE_VERSION;

  override defaults() {
    return {
      ...super.defaults(),
      _model_name: ReportModel.model_name,
      _model_module: ReportModel.model_module,
      _model_module_version: ReportModel.model_module_version,
      _view_name: ReportModel.view_name,
      _view_module: ReportModel.view_module,
      _view_module_version: ReportModel.view_module_version,
      report: {},
      progress: null
    };
  }
}
